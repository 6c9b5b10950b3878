import Foundation

/// A certificate authority made for one test, as an organisation's internal one: a CA
/// certificate, and a server certificate it signed for 127.0.0.1, localhost and any other names
/// the test gives, made with openssl(1) in a folder of the test's.
public struct TestCertificateAuthority: Sendable {
  /// The folder with the server's `cert.pem` and `key.pem`, for ``TLSLoopbackServer``.
  public let serverFolder: String
  /// The CA's certificate (PEM): what a client is told to trust.
  public let certificate: String
  /// A folder holding the CA's certificate under its hashed name, as `SSL_CERT_DIR` wants.
  public let hashedFolder: String

  /// `hostNames`: more names the server's certificate is for (a documented example's hosts,
  /// which a test points at 127.0.0.1).
  public init(folder: String, hostNames: [String] = []) throws {
    serverFolder = folder + "/server"
    hashedFolder = folder + "/hashed"
    certificate = folder + "/ca.pem"
    for made in [serverFolder, hashedFolder] {
      try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: true)
    }
    let key = folder + "/ca-key.pem"
    let request = folder + "/server.csr"
    let extensions = folder + "/server.ext"
    let names = ["IP:127.0.0.1", "DNS:localhost"] + hostNames.map { "DNS:" + $0 }
    try """
    subjectAltName = \(names.joined(separator: ", "))
    basicConstraints = critical, CA:FALSE
    extendedKeyUsage = serverAuth
    """.write(toFile: extensions, atomically: true, encoding: .utf8)
    let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    try Self.openssl(
      ["req", "-x509"] + curve + [
        "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=imagecache test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
      ])
    try Self.openssl(
      ["req"] + curve + [
        "-keyout", serverFolder + "/key.pem", "-out", request, "-subj", "/CN=127.0.0.1",
      ])
    try Self.openssl([
      "x509", "-req", "-in", request, "-CA", certificate, "-CAkey", key, "-CAcreateserial",
      "-out", serverFolder + "/cert.pem", "-days", "2", "-extfile", extensions,
    ])
    let hash = try Self.openssl(["x509", "-hash", "-noout", "-in", certificate])
      .trimmingCharacters(in: .whitespacesAndNewlines)
    try FileManager.default.copyItem(atPath: certificate, toPath: hashedFolder + "/\(hash).0")
  }

  @discardableResult
  private static func openssl(_ arguments: [String]) throws -> String {
    let result = try Command.run("/usr/bin/openssl", arguments)
    guard result.status == 0 else {
      throw CocoaError(
        .fileWriteUnknown,
        userInfo: [NSLocalizedDescriptionKey: "openssl \(arguments[0]): \(result.stderr)"])
    }
    return result.stdout
  }
}
