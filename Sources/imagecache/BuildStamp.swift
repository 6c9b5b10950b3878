/// What this binary was built from, for `--version` and `--version --verbose`. A plain
/// `swift build` keeps these defaults; scripts/build-release writes this file with the commit
/// (`git describe --always --dirty`), the build date and BUILD-INFO (every Swift package's and
/// system library's version) for the one build, then puts it back.
enum BuildStamp {
  static let commit = "unknown commit"
  static let date = ""
  static let buildInfo = ""
}
