import ArgumentParser
import Core
import Foundation
import Runner

/// Parses `--max-age`-style values with the unit parsers of Core. The range is checked in
/// `validate()`, where the flag's name and its range are known: a value out of range is exit 2
/// naming both, never a crash when the seconds become nanoseconds.
struct Duration: ExpressibleByArgument, CustomStringConvertible {
  var seconds: TimeInterval
  /// As given, for messages: an overflowing value's seconds are infinite.
  private var text: String
  var description: String { formatDuration(seconds) }
  init?(argument: String) {
    // A value that does not parse is argument-parser's usage error, which names the flag.
    guard let seconds = try? parseDurationValue(argument) else { return nil }
    self.seconds = seconds
    text = argument
  }

  /// Refuses a value outside `allowed`, naming `flag`.
  func check(_ flag: String, allowed: DurationRange) throws {
    do {
      _ = try allowed.check(seconds, text: text)
    } catch {
      throw ValidationError("\(flag) \(error)")
    }
  }

  /// Refuses a value `setting` does not take, naming its flag, in the job file's words.
  func check(_ setting: JobSetting) throws {
    do {
      _ = try setting.check(seconds: seconds, text: text)
    } catch {
      throw ValidationError("\(setting.flag) \(error)")
    }
  }
}

/// Parses `--max-size`-style values: 0 to 2^63-1 bytes.
struct ByteCount: ExpressibleByArgument, CustomStringConvertible {
  var bytes: UInt64
  var description: String { "\(bytes)" }
  /// Why the value given is not a size, kept for `validate()`: argument-parser's own message
  /// for a value it cannot take would not say the range.
  var problem: UnitParseError?
  init?(argument: String) {
    do {
      bytes = try parseByteCount(argument)
    } catch  where error.outOfRange {
      bytes = 0
      problem = error
    } catch {
      // A value that does not parse is argument-parser's usage error, which names the flag.
      return nil
    }
  }
  init(bytes: UInt64) { self.bytes = bytes }

  /// Refuses a value out of range, naming `flag`.
  func check(_ flag: String) throws {
    if let problem { throw ValidationError("\(flag) \(problem)") }
  }
}

/// Parses `--rate`: requests a second (`20/s`, `300/m`). Why a value is not one is kept for
/// `validate()`, which names the flag and what is expected.
struct RequestRate: ExpressibleByArgument {
  var perSecond: Double = 0
  var problem: UnitParseError?
  init(argument: String) {
    do {
      perSecond = try parseRequestRate(argument)
    } catch {
      problem = error
    }
  }

  /// Refuses a value that is not a rate in range, naming `flag`.
  func check(_ flag: String) throws {
    if let problem { throw ValidationError("\(flag) \(problem)") }
  }
}

/// Parses `--max-bandwidth`: bytes a second (`10MB/s`). Why a value is not one is kept for
/// `validate()`, which names the flag and what is expected.
struct Bandwidth: ExpressibleByArgument {
  var bytesPerSecond: UInt64 = 0
  var problem: UnitParseError?
  init(argument: String) {
    do {
      bytesPerSecond = try parseBandwidth(argument)
    } catch {
      problem = error
    }
  }

  /// Refuses a value that is not a bandwidth in range, naming `flag`.
  func check(_ flag: String) throws {
    if let problem { throw ValidationError("\(flag) \(problem)") }
  }
}

/// Refuses a count `setting` does not take, naming its flag, in the job file's words.
func checkCount(_ value: Int, _ setting: JobSetting) throws {
  do {
    _ = try setting.check(count: value, text: String(value))
  } catch {
    throw ValidationError("\(setting.flag) \(error)")
  }
}

extension JobSetting {
  /// Its flag and aliases, for `@Option(name:)`.
  var names: NameSpecification {
    NameSpecification(([flag] + declaration.aliases).map { .customLong(String($0.dropFirst(2))) })
  }

  /// Its `--help` text, discussion and value name, for `@Option(help:)`.
  var argumentHelp: ArgumentHelp {
    ArgumentHelp(help, discussion: declaration.discussion, valueName: declaration.valueName)
  }
}

extension ExpireType: ExpressibleByArgument {}
extension ValidationLevel: ExpressibleByArgument {}
extension SitemapOrder: ExpressibleByArgument {}
