import Core
import Foundation

/// The metrics of a run whose job file could not be read (not YAML or JSON, a field wrong: exit
/// 2), written to the metrics files the command line names (`--metrics`, the cron wrapper's
/// `IMAGECACHE_METRICS`), so that the run-failed alert fires that night instead of the
/// no-success alert a day later (SPEC section 12). A job's own `metrics:` is in the broken file
/// and is not written.
///
/// The job's name, namespace and shard are in the broken file too, so each file keeps the labels
/// of the series it holds (the last run's): the failure replaces the job's own series, the one
/// the alerts know. A file holding none gets the name the job has when it sets none (its file
/// name), the default namespace and the command line's shard. A path whose `{job}` (or, with no
/// shard on the command line, `{shard}` or `{shards}`) only the broken file could fill in is
/// written only over a file already there, and a guessed `{job}` not when the broken file has
/// a `name:` other than its file name (``namesAnotherJob``): a new file under a guessed name
/// would hold a failure that no later run replaces, and one there would be another job's.
public struct UnreadableJobMetrics: Sendable {
  /// The job file that could not be read.
  public var jobFile: String
  /// The shard the command line names (`--shard`, `--shards`).
  public var shard: Shard?
  /// The command line's metrics paths, placeholders not filled in.
  public var metricsFiles: [String]

  public init(jobFile: String, shard: Shard?, metricsFiles: [String]) {
    self.jobFile = jobFile
    self.shard = shard
    self.metricsFiles = metricsFiles
  }

  /// Whether the job file names a metrics file of its own, as far as a file that cannot be
  /// parsed can tell (the word `metrics` in it): that file is not written, and the command line
  /// says so, and how to have such a night in the metrics.
  public var mentionsOwnMetrics: Bool {
    text?.contains("metrics") ?? false
  }

  /// The broken job file's text, when it can be read and is not over ``Job/maxFileSize``.
  private var text: String? {
    guard let data = try? FileSystem.existingContents(atPath: jobFile),
      data.count <= Job.maxFileSize
    else { return nil }
    return String(decoding: data, as: UTF8.self)
  }

  /// The job's name when its file sets none: the file name without its extension.
  var defaultName: String {
    ((jobFile as NSString).lastPathComponent as NSString).deletingPathExtension
  }

  /// Whether the job file, as far as a file that cannot be parsed can tell, names the job
  /// otherwise than its file name (a `name:` key, YAML's or JSON's, with another value): a file
  /// at a `{job}` path guessed from the file name is then another job's (`eu/nightly.yaml`
  /// named `europe` beside `us/nightly.yaml`, named `nightly` by its file).
  var namesAnotherJob: Bool {
    guard let text else { return false }
    let pattern = #"(?:^|[\s{,])["']?name["']?[ \t]*:[ \t]*["']?([^"'\n,}#]*)"#
    guard let expression = try? NSRegularExpression(pattern: pattern) else { return true }
    let matches = expression.matches(in: text, range: NSRange(text.startIndex..., in: text))
    return matches.contains { match in
      guard let range = Range(match.range(at: 1), in: text) else { return true }
      return text[range].trimmingCharacters(in: .whitespacesAndNewlines) != defaultName
    }
  }

  /// A path whose placeholders only the broken file could fill in.
  private struct NameInBrokenFile: Error, CustomStringConvertible {
    var description: String {
      "its {job}, {shard} or {shards} is filled in from the job file, which could not be read, "
        + "and no earlier run's metrics are at the path guessed from its file name"
    }
  }

  /// A `{job}` path guessed from the file name of a job file that names the job otherwise.
  private struct OtherJobsFile: Error, CustomStringConvertible {
    var description: String {
      "its {job} is filled in from the job file, which could not be read and names the job "
        + "otherwise than its file name: the file at the path guessed from that is another job's"
    }
  }

  /// Writes the failed run's metrics to every file, saying on `console` what was written and
  /// what was not (`warning: metrics not written to ...`, which the cron wrapper mails).
  public func write(console: any RunConsole) {
    for pattern in metricsFiles {
      let path = Job.expandingPlaceholders(in: pattern, name: defaultName, shard: shard)
      let guessed =
        pattern.contains("{job}")
        || (shard == nil && (pattern.contains("{shard}") || pattern.contains("{shards}")))
      do {
        let output = try OutputFile(path: path)
        let previous = output.previousContents()
        guard !guessed || previous != nil else { throw NameInBrokenFile() }
        if guessed, pattern.contains("{job}"), namesAnotherJob { throw OtherJobsFile() }
        let labels = previous.flatMap(Self.labels)
        let metrics = RunMetrics(
          job: labels?.job ?? defaultName,
          namespace: labels?.namespace ?? CacheLocation.defaultNamespace,
          shard: labels.map(\.shard) ?? shard, status: .failed, finishedAt: Date(),
          durationSeconds: 0, prefetch: nil, passes: [], cache: nil, verify: nil)
        try metrics.stage(to: output).commit()
        console.report(.metricsWritten(job: metrics.job, path: path))
      } catch {
        console.report(.warning(.metricsNotWritten(path: path, error: error)))
      }
    }
  }

  /// The `imagecache_job`, `namespace` and `shard` labels of the run-status series in an
  /// earlier metrics file, or `nil` when it holds none.
  static func labels(in text: String) -> (job: String, namespace: String, shard: Shard?)? {
    for line in text.split(separator: "\n") where line.hasPrefix("imagecache_last_run_status{") {
      let labels = Self.labelPairs(line.dropFirst("imagecache_last_run_status{".count))
      guard let job = labels["imagecache_job"], let namespace = labels["namespace"] else {
        return nil
      }
      return (job, namespace, labels["shard"].flatMap(Shard.init))
    }
    return nil
  }

  /// The `name="value"` pairs of a series' labels, up to the closing `}`, their values'
  /// escapes (`\\`, `\"`, `\n`) read back.
  private static func labelPairs(_ text: Substring) -> [String: String] {
    var pairs: [String: String] = [:]
    var rest = text
    while let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)...].first == "\"" {
      let name = rest[..<equals].trimmingCharacters(in: CharacterSet(charactersIn: ", "))
      var value = ""
      var index = rest.index(equals, offsetBy: 2)
      while index < rest.endIndex, rest[index] != "\"" {
        if rest[index] == "\\", rest.index(after: index) < rest.endIndex {
          index = rest.index(after: index)
          value.append(rest[index] == "n" ? "\n" : rest[index])
        } else {
          value.append(rest[index])
        }
        index = rest.index(after: index)
      }
      pairs[name] = value
      guard index < rest.endIndex else { break }
      rest = rest[rest.index(after: index)...]
    }
    return pairs
  }
}
