import CCrypto
import Foundation

/// How SDWebImage names the file that holds a cache key (SPEC section 1).
///
/// The current scheme (SD 5) is `md5(key)` in lowercase hex, then `.` and the key's path
/// extension when it has one. Older SD versions used other schemes; they are listed in
/// ``LegacyScheme`` so that reads and migrations can find files written by them.
public enum CacheFileName {
  /// The longest extension SD appends: NAME_MAX (255) minus the 32 hex digits and the dot.
  public static let maxExtensionLength = 255 - 32 - 1

  /// The file name SD 5 uses for `key`.
  package static func fileName(forKey key: String) -> String {
    join(md5Hex(key), currentExtension(forKey: key))
  }

  /// The file name an older SD version used for `key`.
  package static func fileName(forKey key: String, scheme: LegacyScheme) -> String {
    let digest = md5Hex(key)
    switch scheme {
    case .noExtension:
      return digest
    case .rawStringExtension:
      return join(digest, rawStringExtension(key))
    case .uncappedURLExtension:
      return join(digest, urlExtension(forKey: key) ?? rawStringExtension(key))
    }
  }

  /// The names a variant under derived `key` is written to: the current one and, when SD
  /// before iOS 17 names the same key differently, that one too.
  package static func variantFileNames(forKey key: String) -> [String] {
    let current = fileName(forKey: key)
    let older = fileNameBeforeiOS17(forKey: key)
    return older != current ? [current, older] : [current]
  }

  /// The name SD 5 gives `key` on iOS before 17. `SDDiskCacheFileNameForKey` takes
  /// `keyURL ? keyURL.pathExtension : key.pathExtension`; the NSURL of those systems refused
  /// what ``isURLStringBeforeiOS17(_:)`` refuses (raw braces, a second `#`, ...), so such a key
  /// gets the raw string's extension where iOS 17 parses, encodes and takes the URL's.
  package static func fileNameBeforeiOS17(forKey key: String) -> String {
    guard !isURLStringBeforeiOS17(key) else { return fileName(forKey: key) }
    return join(md5Hex(key), cleanedExtension(rawStringExtension(key)))
  }

  /// Whether `[NSURL URLWithString:]` before iOS 17 made a URL of `string`, rather than nil.
  ///
  /// That NSURL is CFURL's `_CFStringIsLegalURLString` (swift-corelibs-foundation,
  /// `Sources/CoreFoundation/CFURL.c`, with its `sURLValidCharacters` table): every UTF-16
  /// unit is an RFC 2396 character (letters, digits, `-_.!~*'()` and `;/?:@&=+$,`), `[` or
  /// `]` (kept for IPv6 hosts, anywhere), one `#` at most, or `%` followed by two hex digits.
  /// Spaces, `"`, `<`, `>`, `\`, `^`, the backquote, `{`, `|`, `}`, controls and every
  /// non-ASCII unit fail. iOS 17's parser encodes these instead of refusing the string.
  package static func isURLStringBeforeiOS17(_ string: String) -> Bool {
    var sawHash = false
    var hexDigitsDue = 0
    let units = Array(string.utf16)
    for (index, unit) in units.enumerated() {
      // Every unit CFURL accepts is ASCII.
      guard unit < 128 else { return false }
      let character = Character(Unicode.Scalar(UInt8(unit)))
      if hexDigitsDue > 0 {
        guard character.isHexDigit else { return false }
        hexDigitsDue -= 1
        continue
      }
      switch character {
      case "%":
        guard index + 2 < units.count else { return false }
        hexDigitsDue = 2
      case "[", "]":
        continue
      case "#":
        guard !sawHash else { return false }
        sawHash = true
      case "a"..."z", "A"..."Z", "0"..."9":
        continue
      default:
        // CFURL's `VALID` characters besides letters and digits: RFC 2396's other
        // unreserved and its reserved ones.
        guard "-_.!~*'();/?:@&=+$,".contains(character) else { return false }
      }
    }
    return true
  }

  /// A name SD 5 would not write: an MD5 with no extension (readable through SD's fallback, but
  /// the current name carries the URL's extension when it has one), or an extension holding
  /// query text or a colon.
  package static func isLegacyName(_ name: String) -> Bool {
    let digest = name.prefix(32)
    guard digest.count == 32, digest.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
      return false
    }
    if name.count == 32 { return true }
    let ext = name.dropFirst(33)
    return ext.contains("?") || ext.contains(":") || ext.contains("&") || ext.contains("=")
  }

  /// Every distinct legacy name of `key` that differs from its current name.
  package static func legacyFileNames(forKey key: String) -> [String] {
    let current = fileName(forKey: key)
    var names: [String] = []
    for scheme in LegacyScheme.allCases {
      let name = fileName(forKey: key, scheme: scheme)
      if name != current && !names.contains(name) { names.append(name) }
    }
    return names
  }

  /// Lowercase hex MD5 of the key's UTF-8 bytes.
  ///
  /// SD hashes `key.UTF8String` with `strlen`, so a key with an embedded NUL is hashed only up
  /// to that NUL; we do the same so that such keys land on the same file.
  package static func md5Hex(_ key: String) -> String {
    var key = key
    // Without copies: this runs for every URL of every run.
    return key.withUTF8 { utf8 in
      let bytes = UnsafeRawBufferPointer(utf8)
      let count = bytes.firstIndex(of: 0) ?? bytes.count
      return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { digest in
        ic_md5(utf8.baseAddress, count, digest.baseAddress)
        return String(unsafeUninitializedCapacity: 32) { hex in
          for (index, byte) in digest.enumerated() {
            hex[2 * index] = hexDigit(byte >> 4)
            hex[2 * index + 1] = hexDigit(byte & 0x0F)
          }
          return 32
        }
      }
    }
  }

  private static func hexDigit(_ value: UInt8) -> UInt8 {
    value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
  }

  /// The extension SD 5 appends for `key`, or `nil` for none.
  ///
  /// It is the path extension of the key parsed as a URL (from the percent-decoded path, never
  /// the query or fragment); only a key that does not parse as a URL uses the raw string's
  /// path extension. NUL and `:` are removed, and an extension longer than
  /// ``maxExtensionLength`` UTF-16 units (NSString's length, as SD measures it) is dropped.
  ///
  /// - Parameter parsedKey: `URL(string: key)`, when the caller has parsed `key` already.
  package static func currentExtension(forKey key: String, parsedKey: URL? = nil) -> String? {
    cleanedExtension(urlExtension(forKey: key, parsedKey: parsedKey) ?? rawStringExtension(key))
  }

  /// `raw` without NUL and `:`, or `nil` when that is empty or too long.
  static func cleanedExtension(_ raw: String) -> String? {
    let cleaned = String(raw.unicodeScalars.filter { $0 != "\0" && $0 != ":" })
    guard !cleaned.isEmpty, cleaned.utf16.count <= maxExtensionLength else { return nil }
    return cleaned
  }

  /// The path extension of `key` as a URL, or `nil` when `key` does not parse as one.
  ///
  /// Foundation on Linux shares its URL parser with Apple's current Foundation, which is what
  /// SD's `[NSURL URLWithString:]` runs on, including its encoding of invalid characters.
  static func urlExtension(forKey key: String, parsedKey: URL? = nil) -> String? {
    guard let url = parsedKey ?? URL(string: key) else { return nil }
    return url.pathExtension
  }

  /// `-[NSString pathExtension]` of the raw key: what follows the last `.` of the last path
  /// component, query and all.
  static func rawStringExtension(_ key: String) -> String {
    (key as NSString).pathExtension
  }

  /// `digest.ext`, or the digest alone for no (or an empty) extension.
  static func join(_ digest: String, _ ext: String?) -> String {
    guard let ext, !ext.isEmpty else { return digest }
    return digest + "." + ext
  }
}

/// File-name schemes of older SD versions (SPEC section 1, legacy layouts).
package enum LegacyScheme: String, CaseIterable, Sendable {
  /// Up to SD 3.7.3: the MD5 alone. SD 5 still reads it as a fallback.
  case noExtension
  /// SD 3.7.4 to 4.1.x: the raw string's extension, so query text can end up in it.
  case rawStringExtension
  /// SD 4.2 to 4.4.2: the URL path extension, with no length cap and nothing removed.
  case uncappedURLExtension
}
