#!/usr/bin/env python3
"""Serves a folder on 127.0.0.1 over HTTP/1.1 for the bundled example (keep-alive, a listen
backlog larger than http.server's 5, threads). Usage: serve.py FOLDER PORT"""
import functools, http.server, sys


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 128
    daemon_threads = True


folder, port = sys.argv[1], int(sys.argv[2])
Server(("127.0.0.1", port), functools.partial(Handler, directory=folder)).serve_forever()
