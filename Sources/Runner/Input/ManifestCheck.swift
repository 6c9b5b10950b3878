import Core
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

extension Job {
  /// Refuses the job's manifests before anything runs (exit 2): one that is missing, a folder
  /// or unreadable, a URL that is not one, or a stream (standard input, a pipe, a FIFO) that
  /// would be read twice (named twice, or by a job that both migrates and prefetches) and say
  /// nothing the second time. The one check for the command line and ``JobRunner``.
  ///
  /// - Parameter what: how errors name a manifest (`manifest`, `--manifest`,
  ///   `nightly.yaml: manifest`).
  public func checkManifests(what: String) throws(ConfigurationError) {
    for manifest in manifests { try Self.checkManifest(manifest, what: what) }
    try Self.checkStreamsReadOnce(
      manifests, readTwice: passes.contains(.migrate) && prefetchesManifests, what: what)
  }

  /// Refuses a manifest that is neither an http(s) URL, `-` (standard input) nor a readable
  /// file that is not a folder (a FIFO or `/dev/stdin` is read as it comes).
  public static func checkManifest(_ manifest: String, what: String) throws(ConfigurationError) {
    if manifest == ManifestItems.standardInput { return }
    if ManifestItems.isRemote(manifest) {
      guard let url = URL(string: manifest), url.host?.isEmpty == false else {
        throw ConfigurationError(source: "\(what) \(manifest)", message: "not a valid URL")
      }
      return
    }
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: manifest, isDirectory: &isDirectory) else {
      throw ConfigurationError(
        source: "\(what) \(manifest)",
        message: FileSystem.reason("no such file", forUserPath: manifest))
    }
    guard !isDirectory.boolValue, FileManager.default.isReadableFile(atPath: manifest) else {
      throw ConfigurationError(
        source: "\(what) \(manifest)",
        message: FileSystem.reason("not a readable file", forUserPath: manifest))
    }
    // A stream's first bytes are the run's to read; a file's can be looked at now.
    guard !ManifestItems.isStream(manifest) else { return }
    let descriptor = open(manifest, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    if let problem = ManifestItems.notAManifest(ManifestItems.head(of: descriptor)) {
      throw ConfigurationError(source: "\(what) \(manifest)", message: problem)
    }
  }

  /// Refuses what would read a manifest that can be read only once twice: named twice, or
  /// read by both the migrate pass and the prefetch (`readTwice`).
  public static func checkStreamsReadOnce(_ manifests: [String], readTwice: Bool, what: String)
    throws(ConfigurationError)
  {
    var seen: Set<String> = []
    for manifest in manifests where ManifestItems.isStream(manifest) {
      guard seen.insert(manifest).inserted else {
        throw ConfigurationError(
          source: "\(what) \(manifest)", message: "named twice, but it can be read only once")
      }
      if readTwice {
        throw ConfigurationError(
          source: "\(what) \(manifest)",
          message: "can be read only once, but the migrate pass and the prefetch both read the "
            + "manifests; give a regular file")
      }
    }
  }
}
