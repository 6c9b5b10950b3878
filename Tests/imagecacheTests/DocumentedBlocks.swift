import Foundation

/// A command or a file the documentation shows: a fenced block of a Markdown page, or an
/// example of a man page.
struct DocumentedBlock: CustomStringConvertible {
  /// The page, relative to the repository, and the line the block starts on.
  var page: String
  var line: Int
  /// The fence's language (`sh`, `yaml`...); `sh` for a man page's command examples.
  var language: String
  var text: String
  /// What the page shows the block printing: an untagged fence right after it.
  var output: String?

  /// The languages of blocks that are commands to run; every other language is a file's
  /// content (`yaml`, `json`, `text`...).
  static let commandLanguages: Set<String> = ["sh", "bash", "shell", "console", "cron"]

  var isCommand: Bool { Self.commandLanguages.contains(language) }

  /// The first line that is neither blank nor a comment: what names the block in a list.
  var firstCommand: String {
    text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
      .first { !$0.isEmpty && !$0.hasPrefix("#") } ?? ""
  }

  var description: String { "\(page):\(line) (\(firstCommand))" }

  /// The file a block of content says it is, by a first line `# PATH` (`# urls.txt`): the
  /// file the commands after it on its page read.
  var declaredFile: String? {
    guard !isCommand, let first = text.split(separator: "\n").first,
      let match = first.wholeMatch(of: /# (\S+)/)
    else { return nil }
    return String(match.output.1)
  }
}

/// The blocks of the README, docs/ and the man pages, in page order.
enum DocumentedBlocks {
  /// A fence with no language that does not follow a command block: nothing says what it is.
  struct UntaggedFence: Error, CustomStringConvertible {
    var page: String
    var line: Int
    var description: String {
      "\(page):\(line): a fence with no language that is not the output of the command block "
        + "right before it: tag it (```sh for commands, ```text for a listing or a diagram)"
    }
  }

  /// A Markdown page's fenced blocks, and each table cell that is a command alone
  /// (`` `imagecache stats --cache /srv/c --json` ``, as the README's table of commands has
  /// them). An untagged fence separated from the command block before it by blank lines only is
  /// that block's output; any other untagged fence is an error, so that every block is either
  /// commands, a file or shown output.
  static func markdown(_ text: String, page: String) throws -> [DocumentedBlock] {
    var blocks: [DocumentedBlock] = []
    let lines = text.components(separatedBy: "\n")
    var commandJustClosed: Int?
    var index = 0
    while index < lines.count {
      let line = lines[index]
      guard line.hasPrefix("```") else {
        if !line.trimmingCharacters(in: .whitespaces).isEmpty { commandJustClosed = nil }
        if line.hasPrefix("|") {
          blocks += tableCommands(line).map {
            DocumentedBlock(page: page, line: index + 1, language: "sh", text: $0)
          }
        }
        index += 1
        continue
      }
      let language = line.dropFirst(3).trimmingCharacters(in: .whitespaces)
      var end = index + 1
      while end < lines.count && !lines[end].hasPrefix("```") { end += 1 }
      let body = lines[(index + 1)..<min(end, lines.count)].joined(separator: "\n")
      if language.isEmpty {
        guard let command = commandJustClosed else {
          throw UntaggedFence(page: page, line: index + 1)
        }
        blocks[command].output = body
        commandJustClosed = nil
      } else {
        blocks.append(
          DocumentedBlock(page: page, line: index + 1, language: language, text: body))
        commandJustClosed = blocks[blocks.count - 1].isCommand ? blocks.count - 1 : nil
      }
      index = end + 1
    }
    return blocks
  }

  /// The cells of a table row that are one code span holding an imagecache command, with
  /// Markdown's `\|` read as `|`.
  static func tableCommands(_ row: String) -> [String] {
    row.replacingOccurrences(of: "\\|", with: "\u{0}").split(separator: "|").compactMap { cell in
      let cell = cell.trimmingCharacters(in: .whitespaces)
      guard let match = cell.wholeMatch(of: /`(imagecache [^`]+)`/) else { return nil }
      return String(match.output.1).replacingOccurrences(of: "\u{0}", with: "|")
    }
  }

  /// A man page's examples: the literal displays of its EXAMPLES section (commands in a
  /// section 1 page, a file in a section 5 one), and each command of an "Examples:" paragraph,
  /// as `--help` and so imagecache(1) carry them: one block each, as each stands alone.
  static func manPage(_ text: String, page: String) -> [DocumentedBlock] {
    let lines = text.components(separatedBy: "\n")
    let commands = page.hasSuffix(".1")
    var blocks: [DocumentedBlock] = []
    var section = ""
    var index = 0
    while index < lines.count {
      let line = lines[index]
      if line.hasPrefix(".Sh ") {
        section = line.dropFirst(4).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
      } else if section == "EXAMPLES" && line.hasPrefix(".Bd -literal") {
        var end = index + 1
        while end < lines.count && lines[end] != ".Ed" { end += 1 }
        blocks.append(
          DocumentedBlock(
            page: page, line: index + 2, language: commands ? "sh" : "text",
            text: lines[(index + 1)..<end].map(plain).joined(separator: "\n")))
        index = end
      } else if line == "Examples:" || line == "Example:" {
        var command: [String] = []
        while index + 1 < lines.count && lines[index + 1].hasPrefix("  ") {
          index += 1
          let text = plain(lines[index]).trimmingCharacters(in: .whitespaces)
          command.append(text)
          if !text.hasSuffix("\\") {
            blocks.append(
              DocumentedBlock(
                page: page, line: index + 2 - command.count, language: "sh",
                text: command.joined(separator: "\n")))
            command = []
          }
        }
      }
      index += 1
    }
    return blocks
  }

  /// A roff line as the page renders it: `\%` (no hyphenation) and `\&` are nothing, `\-` is
  /// a minus and `\e` a backslash.
  static func plain(_ line: String) -> String {
    line.replacingOccurrences(of: "\\%", with: "").replacingOccurrences(of: "\\&", with: "")
      .replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\e", with: "\\")
  }

  /// The pages users read: the README, docs/*.md and the man pages.
  static func pages(repository: URL) throws -> [String] {
    func list(_ folder: String, _ suffixes: [String]) throws -> [String] {
      try FileManager.default.contentsOfDirectory(
        atPath: repository.appendingPathComponent(folder).path
      ).filter { name in suffixes.contains { name.hasSuffix($0) } }.sorted().map {
        folder + "/" + $0
      }
    }
    return try ["README.md"] + list("docs", [".md"]) + list("man", [".1", ".5"])
  }

  /// Every page's blocks, in page order.
  static func all(repository: URL) throws -> [DocumentedBlock] {
    try pages(repository: repository).flatMap { page in
      let text = try String(
        contentsOf: repository.appendingPathComponent(page), encoding: .utf8)
      return page.hasSuffix(".md")
        ? try markdown(text, page: page) : manPage(text, page: page)
    }
  }
}
