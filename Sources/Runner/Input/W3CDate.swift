import Foundation

/// The W3C datetime of `<lastmod>`: `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, or a full date with
/// `Thh:mm`, optional seconds and fraction, and `Z` or `±hh:mm`.
enum W3CDate {
  static func parse(_ text: String) -> Date? {
    let bytes = Array(text.utf8)
    var index = 0
    func number(_ digits: Int) -> Int? {
      guard index + digits <= bytes.count else { return nil }
      var value = 0
      for byte in bytes[index..<index + digits] {
        guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
        value = value * 10 + Int(byte - UInt8(ascii: "0"))
      }
      index += digits
      return value
    }
    func take(_ character: Character) -> Bool {
      guard index < bytes.count, bytes[index] == character.asciiValue else { return false }
      index += 1
      return true
    }
    guard let year = number(4) else { return nil }
    var components = DateComponents(year: year, month: 1, day: 1, hour: 0, minute: 0, second: 0)
    var offset = 0
    if take("-") {
      guard let month = number(2), (1...12).contains(month) else { return nil }
      components.month = month
      if take("-") {
        guard let day = number(2), (1...31).contains(day) else { return nil }
        components.day = day
        if take("T") {
          guard let hour = number(2), take(":"), let minute = number(2) else { return nil }
          components.hour = hour
          components.minute = minute
          if take(":") {
            guard let second = number(2) else { return nil }
            components.second = second
            if take(".") {
              while index < bytes.count,
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index])
              {
                index += 1
              }
            }
          }
          if take("Z") {
            offset = 0
          } else {
            let sign = take("+") ? 1 : take("-") ? -1 : 0
            guard sign != 0, let hours = number(2), take(":"), let minutes = number(2) else {
              return nil
            }
            offset = sign * (hours * 3600 + minutes * 60)
          }
        }
      }
    }
    guard index == bytes.count else { return nil }
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(secondsFromGMT: 0)!
    return calendar.date(from: components)?.addingTimeInterval(TimeInterval(-offset))
  }
}
