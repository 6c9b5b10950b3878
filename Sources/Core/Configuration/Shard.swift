import CCrypto
import Foundation

/// One of N shards of a run (SPEC section 9): the URLs whose cache key hashes to `index`.
///
/// The hash is fixed forever, the same on every machine, version and CPU: the first 8 bytes of
/// the MD5 of the cache key's UTF-8 bytes (the digest SD names the file by), read as a
/// big-endian unsigned 64-bit integer, modulo `count`. So a file's shard can be read from its
/// name alone: its first 16 hex digits.
public struct Shard: Sendable, Equatable, Hashable, CustomStringConvertible {
  /// 0-based, as Kubernetes' `JOB_COMPLETION_INDEX`.
  package let index: Int
  package let count: Int

  package init?(index: Int, count: Int) {
    guard count >= 1, (0..<count).contains(index) else { return nil }
    self.index = index
    self.count = count
  }

  /// `K/N`, with `0 <= K < N`.
  package init?(_ text: String) {
    let parts = text.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else {
      return nil
    }
    self.init(index: index, count: count)
  }

  public var description: String { "\(index)/\(count)" }

  /// What names this shard's lock and state files: `shard-K-of-N`.
  package var fileSuffix: String { "shard-\(index)-of-\(count)" }

  /// The shard of `cacheKey` among `count`.
  public static func index(ofCacheKey cacheKey: String, count: Int) -> Int {
    let bytes = Array(cacheKey.utf8.prefix { $0 != 0 })
    var digest = [UInt8](repeating: 0, count: 16)
    bytes.withUnsafeBufferPointer { ic_md5($0.baseAddress, $0.count, &digest) }
    return index(ofDigestPrefix: digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }, count: count)
  }

  private static func index(ofDigestPrefix prefix: UInt64, count: Int) -> Int {
    Int(prefix % UInt64(count))
  }

  public func owns(cacheKey: String) -> Bool {
    Self.index(ofCacheKey: cacheKey, count: count) == index
  }

  /// Whether the cache file `name` (SD's `md5[.ext]`, or a legacy variant) is this shard's;
  /// `nil` when the name does not start with 32 hex digits (no shard owns it).
  package func owns(fileName name: String) -> Bool? {
    let hex = name.utf8.prefix(32)
    guard hex.count == 32, hex.allSatisfy({ $0.isHexDigit }) else { return nil }
    guard let prefix = UInt64(String(decoding: hex.prefix(16), as: UTF8.self), radix: 16) else {
      return nil
    }
    return Self.index(ofDigestPrefix: prefix, count: count) == index
  }
}

extension Shard {
  /// Whether the file `name` is this shard's to merge, count or check: the shard its digest
  /// names, and shard 0 for a name that starts with no digest (a legacy SD 3/4 folder's own
  /// files, anything else put in a cache), so that exactly one shard of a fleet owns each file.
  package func ownsFile(named name: String) -> Bool {
    owns(fileName: name) ?? (index == 0)
  }
}

extension UInt8 {
  fileprivate var isHexDigit: Bool {
    (0x30...0x39).contains(self) || (0x61...0x66).contains(self) || (0x41...0x46).contains(self)
  }
}

/// A number, or `auto` for one found as the run goes: how many shards a worker is told there
/// are (`--shards N`, or `--shards auto` to read N from the engine's environment too), and the
/// per-host limit (`--per-host-concurrency N|auto`).
package enum CountOrAuto: Sendable, Equatable {
  case fixed(Int)
  case auto
}

/// How many shards a worker is told there are.
package typealias ShardCount = CountOrAuto

extension Shard {
  /// The shard an engine's environment gives a worker (SPEC section 9), or `nil` when none
  /// of its variables is set:
  ///
  /// - Kubernetes' `JOB_COMPLETION_INDEX` is K; N must be given (`.fixed`): Kubernetes does not
  ///   say how many completions a Job has.
  /// - Slurm's job arrays: K = (`SLURM_ARRAY_TASK_ID` - `_MIN`) / `_STEP`,
  ///   N = (`_MAX` - `_MIN`) / `_STEP` + 1, and `_COUNT`, when set, must equal N: so
  ///   `--array=0-3`, `--array=1-4` and `--array=0-6:2` are all shards 0 to 3 of 4, and a list
  ///   with gaps (`--array=1,2,5`) is refused rather than leaving a shard undone.
  /// - Grid Engine's task arrays (`qsub -t 1-4`): the same with `SGE_TASK_ID`, `_FIRST`,
  ///   `_LAST` and `_STEPSIZE` (`SGE_TASK_ID=undefined` outside an array job is none).
  ///
  /// Rerunning shards of a fleet (issue 40): with N given (`.fixed`), an array of fewer
  /// tasks (`sbatch --array=2`, `qsub -t 3`) is a rerun of some of the fleet's tasks,
  /// and K = task ID - `firstTask`, the fleet array's first task ID (Grid Engine's start at 1,
  /// so 1 unless given; Slurm's may start at 0 or 1, so it must be given). With `.auto`, an
  /// array of one task is refused: it cannot tell a rerun from a whole fleet.
  ///
  /// A variable that is not a whole number, or that contradicts another or `count`, is a
  /// ``ConfigurationError`` naming it and its value.
  package static func fromEnvironment(
    _ environment: [String: String], count: ShardCount, firstTask: Int? = nil
  ) throws(ConfigurationError) -> Shard? {
    if let text = environment["JOB_COMPLETION_INDEX"] {
      guard case .fixed(let count) = count else {
        throw ConfigurationError(
          source: "environment", field: "JOB_COMPLETION_INDEX",
          message: "a Kubernetes Indexed Job does not say how many completions it has: give "
            + "--shards N (the Job's completions), not --shards auto")
      }
      guard let index = Int(text), let shard = Shard(index: index, count: count) else {
        throw ConfigurationError(
          source: "environment", field: "JOB_COMPLETION_INDEX",
          message: "\(text.debugDescription) is invalid: with --shards \(count) it must be a "
            + "whole number from 0 to \(count - 1)")
      }
      return shard
    }
    for engine in ArrayEngine.all {
      guard let id = environment[engine.id], id != "undefined" else { continue }
      return try engine.shard(id: id, environment: environment, count: count, firstTask: firstTask)
    }
    return nil
  }

  /// The variables of an engine's task array.
  private struct ArrayEngine {
    var name: String
    var id: String
    var min: String
    var max: String
    var step: String
    var count: String?
    /// The first task ID of an array when nothing says otherwise, if the engine has one.
    var defaultFirstTask: Int?

    static let all = [
      ArrayEngine(
        name: "Slurm", id: "SLURM_ARRAY_TASK_ID", min: "SLURM_ARRAY_TASK_MIN",
        max: "SLURM_ARRAY_TASK_MAX", step: "SLURM_ARRAY_TASK_STEP",
        count: "SLURM_ARRAY_TASK_COUNT", defaultFirstTask: nil),
      ArrayEngine(
        name: "Grid Engine", id: "SGE_TASK_ID", min: "SGE_TASK_FIRST", max: "SGE_TASK_LAST",
        step: "SGE_TASK_STEPSIZE", count: nil, defaultFirstTask: 1),
    ]

    func shard(
      id idText: String, environment: [String: String], count: ShardCount, firstTask: Int?
    ) throws(ConfigurationError) -> Shard {
      func fail(_ variable: String, _ message: String) -> ConfigurationError {
        ConfigurationError(source: "environment", field: variable, message: message)
      }
      func number(_ variable: String, required: Bool = true) throws(ConfigurationError) -> Int? {
        guard let text = environment[variable] else {
          guard !required else {
            throw fail(
              variable, "not set, though \(self.id) is: cannot tell the \(name) array's range")
          }
          return nil
        }
        guard let value = Int(text), value >= 0 else {
          throw fail(variable, "\(text.debugDescription) is not a whole number, 0 or more")
        }
        return value
      }
      let id = try number(self.id)!
      let min = try number(self.min)!
      let max = try number(self.max)!
      let step = try number(self.step, required: false) ?? 1
      guard step >= 1 else { throw fail(self.step, "\(step) is not a step: it must be 1 or more") }
      guard min <= max else {
        throw fail(self.max, "\(max) is below \(self.min)=\(min)")
      }
      guard (min...max).contains(id), (id - min) % step == 0 else {
        throw fail(
          self.id,
          "\(id) is not a task of the array \(min)-\(max) with step \(step) "
            + "(\(self.min)=\(min), \(self.max)=\(max), \(self.step)=\(step))")
      }
      guard (max - min) % step == 0 else {
        throw fail(
          self.max, "\(max) is not \(self.min)=\(min) plus a whole number of \(self.step)=\(step)")
      }
      let tasks = (max - min) / step + 1
      if let countVariable = self.count, let given = try number(countVariable, required: false),
        given != tasks
      {
        throw fail(
          countVariable,
          "\(given) tasks, but \(self.min)=\(min), \(self.max)=\(max) and \(self.step)=\(step) "
            + "make \(tasks): an array with gaps (such as 1,2,5) cannot be shards; use a range")
      }
      switch count {
      case .fixed(let expected) where expected < tasks:
        throw fail(
          self.max,
          "--shards \(expected), but the \(name) array has \(tasks) tasks (\(self.min)=\(min), "
            + "\(self.max)=\(max), \(self.step)=\(step)); give the same number, or --shards auto")
      case .fixed(let expected) where expected > tasks:
        return try rerun(id: id, of: expected, tasks: tasks, firstTask: firstTask)
      case .fixed:
        if let firstTask, firstTask != min {
          throw fail(
            self.min,
            "\(min), but --first-task \(firstTask): the array of the whole fleet starts at its "
              + "first task")
        }
      case .auto:
        guard tasks > 1 else {
          throw fail(
            self.id,
            "\(id) is an array of one task (\(self.min)=\(min), \(self.max)=\(max)), which "
              + "cannot tell a rerun of one shard from a whole fleet: give --shards N (the "
              + "fleet's number of shards), and --first-task (its array's first task ID)")
        }
      }
      return Shard(index: (id - min) / step, count: tasks)!
    }

    /// Task `id` of an array of `tasks` that reruns some of the `count` shards of a fleet whose
    /// array started at `firstTask`.
    private func rerun(id: Int, of count: Int, tasks: Int, firstTask: Int?)
      throws(ConfigurationError) -> Shard
    {
      guard let first = firstTask ?? defaultFirstTask else {
        throw ConfigurationError(
          source: "environment", field: self.id,
          message: "the \(name) array has \(tasks) tasks, but --shards \(count): to rerun "
            + "shards of the fleet, give --first-task with the first task ID of the fleet's "
            + "array (0 for --array=0-\(count - 1), 1 for --array=1-\(count)), so that task \(id) "
            + "names its shard; or give an array of \(count) tasks")
      }
      guard let shard = Shard(index: id - first, count: count) else {
        throw ConfigurationError(
          source: "environment", field: self.id,
          message: "\(id) is not a task of a fleet of \(count) shards whose array starts at "
            + "\(first) (tasks \(first) to \(first + count - 1))")
      }
      return shard
    }
  }
}
