import Core
import XCTest

/// Durations and sizes as users write them (SPEC section 7), and their ranges: a value out of
/// range is an error that states the range, never a trap when it becomes nanoseconds or bytes.
final class UnitsTests: XCTestCase {
  private func rangeError(_ parse: () throws -> Any) -> UnitParseError? {
    do {
      _ = try parse()
      return nil
    } catch {
      return error as? UnitParseError
    }
  }

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

  func testBandwidthsAreSizesASecond() throws {
    XCTAssertEqual(try parseBandwidth("10MB/s"), 10_000_000)
    XCTAssertEqual(try parseBandwidth("500KiB/s"), 512_000)
    XCTAssertEqual(try parseBandwidth("1MB"), 1_000_000)
    for text in ["999B/s", "0", "1e30GB/s", "fast", "10MB/m"] {
      XCTAssertThrowsError(try parseBandwidth(text), text)
    }
  }
}
