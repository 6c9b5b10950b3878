import Core
import XCTest

/// The unit error `parse` throws, if it throws one.
private func rangeError(_ parse: () throws -> Any) -> UnitParseError? {
  do {
    _ = try parse()
    return nil
  } catch {
    return error as? UnitParseError
  }
}

/// Durations and sizes as users write them (SPEC section 7), and their ranges: a value out of
/// range is an error that states the range, never a trap when it becomes nanoseconds or bytes.
final class UnitsTests: XCTestCase {

  func testDurationsPastOneHundredYearsAreOutOfRangeAndSaySo() throws {
    XCTAssertEqual(try parseDuration("36500d", allowed: .positive), 36_500 * 86_400)
    XCTAssertEqual(try parseDuration("250ms", allowed: .positive), 0.25)
    for text in ["1e308", "1e400", "1e308w", "36501d", "-5s", "0.0001"] {
      let error = rangeError { try parseDuration(text, allowed: .positive) }
      XCTAssertEqual(error?.outOfRange, true, text)
      XCTAssertTrue(
        error?.description.contains("from 1ms to 36500d (100 years)") == true,
        error?.description ?? text)
    }
  }

  func testAPracticallyNeverAgeIsAcceptedAndANegativeOneStillMeansNever() throws {
    XCTAssertEqual(try parseDuration("200000d", allowed: .age), 200_000 * 86_400)
    XCTAssertEqual(try parseDuration("-1", allowed: .age), -1)
    let error = rangeError { try parseDuration("1000001d", allowed: .age) }
    XCTAssertEqual(error?.outOfRange, true)
    XCTAssertTrue(error?.description.contains("1000000d") == true, error?.description ?? "")
  }

  func testNaNInfinityAndHexAreNotDurations() throws {
    for text in ["nan", "NaN", "inf", "-infinity", "0x10", "1e", "--1", "", "s", "1.2.3s"] {
      let error = rangeError { try parseDuration(text, allowed: .age) }
      XCTAssertEqual(error?.outOfRange, false, text)
      XCTAssertTrue(error?.description.contains("a duration such as") == true, text)
    }
  }

  func testSizesUpToTwoToTheSixtyThreeMinusOneAreExact() throws {
    XCTAssertEqual(try parseByteCount("9223372036854775807"), UInt64(Int64.max))
    XCTAssertEqual(try parseByteCount("9223372036854775807B"), UInt64(Int64.max))
    XCTAssertEqual(try parseByteCount("8388607TiB"), 8_388_607 * 1_099_511_627_776)
    XCTAssertEqual(try parseByteCount("1.5KiB"), 1536)
    XCTAssertEqual(try parseByteCount("2GB"), 2_000_000_000)
    for text in [
      "9223372036854775808", "18446744073709551616", "99999999999999999999999", "1e30GB",
      "8388608TiB", "9.3e18", "-1", "-1KB", "1e400",
    ] {
      let error = rangeError { try parseByteCount(text) }
      XCTAssertEqual(error?.outOfRange, true, text)
      XCTAssertTrue(
        error?.description.contains("from 0 to 9223372036854775807 bytes") == true,
        error?.description ?? text)
    }
    for text in ["nan", "inf", "2^63", "0x10", "MB"] {
      XCTAssertEqual(rangeError { try parseByteCount(text) }?.outOfRange, false, text)
    }
  }

  func testEveryDurationUnitAndABareNumberOfSeconds() throws {
    let expected: [(String, TimeInterval)] = [
      ("250ms", 0.25), ("30s", 30), ("15m", 900), ("12h", 43_200), ("7d", 604_800),
      ("2w", 1_209_600), ("90", 90), ("1.5h", 5400), (".5m", 30), ("1e3s", 1000),
      ("+5s", 5), (" 30s ", 30), ("30 s", 30), ("0", 0),
    ]
    for (text, seconds) in expected {
      XCTAssertEqual(try parseDuration(text, allowed: .nonNegative), seconds, text)
    }
    XCTAssertEqual(try parseDuration("-1d", allowed: .age), -86_400)
  }

  /// `m` is minutes and `ms` milliseconds; units are lower case, so `5M` (months? megabytes?)
  /// is no duration rather than a guess.
  func testMinutesAreNotMillisecondsAndUnitsAreLowerCase() throws {
    XCTAssertEqual(try parseDuration("5m", allowed: .positive), 300)
    XCTAssertEqual(try parseDuration("5ms", allowed: .positive), 0.005)
    for text in ["5M", "5S", "5D", "5 minutes", "1d2h", "1h30m", "5sec", "ms5", "5mss"] {
      let error = rangeError { try parseDuration(text, allowed: .age) }
      XCTAssertEqual(error?.outOfRange, false, text)
      XCTAssertEqual(error?.value, text, "the error quotes what was given")
    }
  }

  func testTheBoundsOfEachDurationRangeAreIncluded() throws {
    XCTAssertEqual(try parseDuration("1ms", allowed: .positive), 0.001)
    XCTAssertEqual(try parseDuration("0", allowed: .nonNegative), 0)
    XCTAssertEqual(try parseDuration("36500d", allowed: .nonNegative), 36_500 * 86_400)
    XCTAssertEqual(try parseDuration("-1000000d", allowed: .age), -1_000_000 * 86_400)
    let outside: [(String, DurationRange)] = [
      ("0", .positive), ("0.9ms", .positive), ("-1ms", .nonNegative), ("36500.001d", .nonNegative),
      ("-1000001d", .age), ("99999999999999999999d", .age), ("1e300w", .age),
    ]
    for (text, range) in outside {
      XCTAssertEqual(rangeError { try parseDuration(text, allowed: range) }?.outOfRange, true, text)
    }
  }

  /// What a message prints is what a user may type back: each formatted duration parses to
  /// itself.
  func testAFormattedDurationParsesBackToItself() throws {
    for seconds: TimeInterval in [
      0.001, 0.25, 1, 59, 60, 90, 3600, 5400, 86_400, 604_800, 36_500 * 86_400,
    ] {
      XCTAssertEqual(
        try parseDuration(formatDuration(seconds), allowed: .nonNegative), seconds,
        formatDuration(seconds))
    }
  }

  func testEverySizeUnitDecimalAndBinaryInAnyCase() throws {
    let expected: [(String, UInt64)] = [
      ("0", 0), ("0B", 0), ("5b", 5), ("1k", 1000), ("1KB", 1000), ("1kb", 1000), ("1KiB", 1024),
      ("1kib", 1024), ("1M", 1_000_000), ("1MB", 1_000_000), ("1MiB", 1_048_576),
      ("1G", 1_000_000_000), ("1GiB", 1_073_741_824), ("1TB", 1_000_000_000_000),
      ("1TiB", 1_099_511_627_776), ("1 MB", 1_000_000), (" 2GB ", 2_000_000_000),
      ("1.5MB", 1_500_000), (".5KiB", 512), ("2e3", 2000), ("2E3KB", 2_000_000),
    ]
    for (text, bytes) in expected {
      XCTAssertEqual(try parseByteCount(text), bytes, text)
    }
  }

  /// Whole numbers are exact past 2^53, where a `Double` would round them.
  func testWholeSizesAreExactWhereADoubleWouldRound() throws {
    XCTAssertEqual(try parseByteCount("9007199254740993"), 9_007_199_254_740_993)
    XCTAssertEqual(try parseByteCount("9007199254740993B"), 9_007_199_254_740_993)
    XCTAssertEqual(try parseByteCount("8589934591GiB"), 8_589_934_591 * 1_073_741_824)
  }

  func testASizeWhoseUnitTakesItPastTheLargestIsOutOfRangeNotWrapped() throws {
    for text in [
      "8589934592GiB", "9223372036854775807KB", "18446744073709551615", "16777216TiB",
      "9223372036854775.808KB",
    ] {
      XCTAssertEqual(rangeError { try parseByteCount(text) }?.outOfRange, true, text)
    }
  }

  func testTextThatIsNoSizeSaysWhatASizeLooksLike() throws {
    for text in ["", " ", "B", "1PB", "1.2.3MB", "1 2MB", "1MBs", "1MB/s", "KB1", "one", "1_000"] {
      let error = rangeError { try parseByteCount(text) }
      XCTAssertEqual(error?.outOfRange, false, text)
      XCTAssertTrue(error?.description.contains("a size such as 500MB") == true, text)
    }
  }

  func testTheLargestSizesFormatWithoutOverflow() {
    XCTAssertEqual(formatBytes(UInt64.max), "18446.7 PB")
    XCTAssertEqual(formatBytes(UInt64(Int64.max)), "9223.4 PB")
    XCTAssertEqual(formatBytes(1_500_000), "1.5 MB")
  }

  func testDurationsFormatInTheirLargestWholeUnit() {
    XCTAssertEqual(formatDuration(7 * 86_400), "7d")
    XCTAssertEqual(formatDuration(90), "90s")
    XCTAssertEqual(formatDuration(0.25), "250ms")
    XCTAssertEqual(formatDuration(1e308), "1e+308s")
  }

  /// A size is said in the largest decimal unit it reaches, from exactly 1000 of the one
  /// below; a duration of zero is `0s`.
  func testSizesTakeTheNextUnitFromExactlyAThousand() {
    XCTAssertEqual(formatBytes(0), "0 B")
    XCTAssertEqual(formatBytes(999), "999 B")
    XCTAssertEqual(formatBytes(1000), "1.0 KB")
    XCTAssertEqual(formatBytes(999_949), "999.9 KB")
    XCTAssertEqual(formatBytes(1_000_000), "1.0 MB")
    XCTAssertEqual(formatBytes(1_000_000_000), "1.0 GB")
    XCTAssertEqual(formatDuration(0), "0s")
  }

  /// A size with a fraction is the nearest whole number of bytes, not the one below it.
  func testAFractionalSizeRoundsToTheNearestByte() throws {
    XCTAssertEqual(try parseByteCount("0.6B"), 1)
    XCTAssertEqual(try parseByteCount("0.0019KB"), 2)
    XCTAssertEqual(try parseByteCount("1.4B"), 1)
    XCTAssertEqual(try parseByteCount("2.5e-3MB"), 2500)
  }
}

/// Issue 29, item 4: request rates and bandwidths as users write them.
final class RateUnitsTests: XCTestCase {

  func testRatesPerSecondMinuteOrHour() throws {
    XCTAssertEqual(try parseRequestRate("20/s"), 20)
    XCTAssertEqual(try parseRequestRate("300/m"), 5)
    XCTAssertEqual(try parseRequestRate("0.5/s"), 0.5)
    XCTAssertEqual(try parseRequestRate("7200/h"), 2)
    XCTAssertEqual(try parseRequestRate("20"), 20, "a bare number is per second")
    for text in ["0/s", "0", "20001/s", "1/d", "fast", "/s", "20/", "nan/s", "1e400/s"] {
      XCTAssertThrowsError(try parseRequestRate(text), text)
    }
  }

  func testTheBoundsOfTheRateRangeAreIncludedAndUnitsMayBeSpaced() throws {
    XCTAssertEqual(try parseRequestRate("1/h"), 1.0 / 3600)
    XCTAssertEqual(try parseRequestRate("10000/s"), 10_000)
    XCTAssertEqual(try parseRequestRate("600000/m"), 10_000)
    XCTAssertEqual(try parseRequestRate(" 20 / s "), 20)
    for text in ["0.9/h", "10000.5/s", "600001/m", "-1/s", "0/s"] {
      let error = rangeError { try parseRequestRate(text) }
      XCTAssertEqual(error?.outOfRange, true, text)
      XCTAssertTrue(error?.description.contains("from 1/h to 10000/s") == true, text)
    }
    for text in ["20/S", "20/sec", "20/s/s", "20 per s", "/", "", "0x10/s"] {
      let error = rangeError { try parseRequestRate(text) }
      XCTAssertEqual(error?.outOfRange, false, text)
      XCTAssertTrue(error?.description.contains("a rate such as") == true, text)
    }
  }

  func testTheSmallestBandwidthIsOneKilobyteASecond() throws {
    XCTAssertEqual(try parseBandwidth("1KB/s"), 1000)
    XCTAssertEqual(try parseBandwidth("1000"), 1000)
    XCTAssertEqual(try parseBandwidth("1kb/S"), 1000, "units in any case, as sizes")
    XCTAssertEqual(try parseBandwidth("9223372036854775807/s"), UInt64(Int64.max))
    for text in ["999", "0.999KB/s", "9223372036854775808/s", "1e30GB/s"] {
      let error = rangeError { try parseBandwidth(text) }
      XCTAssertEqual(error?.outOfRange, true, text)
      XCTAssertTrue(error?.description.contains("a bandwidth from 1KB/s") == true, text)
    }
    for text in ["10MB/m", "10MB/", "/s", "fast"] {
      let error = rangeError { try parseBandwidth(text) }
      XCTAssertEqual(error?.outOfRange, false, text)
      XCTAssertTrue(error?.description.contains("a bandwidth such as") == true, text)
    }
  }

  func testBandwidthsAreSizesASecond() throws {
    XCTAssertEqual(try parseBandwidth("10MB/s"), 10_000_000)
    XCTAssertEqual(try parseBandwidth("500KiB/s"), 512_000)
    XCTAssertEqual(try parseBandwidth("1MB"), 1_000_000)
    for text in ["999B/s", "0", "1e30GB/s", "fast", "10MB/m"] {
      XCTAssertThrowsError(try parseBandwidth(text), text)
    }
  }
}
