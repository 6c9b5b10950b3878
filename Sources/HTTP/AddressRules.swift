import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Which addresses requests may not connect to (issue 38; docs/security.md): checked when a
/// connection is opened, on the address the name resolved to, for images, sitemaps and remote
/// manifests and every redirect hop alike, so that neither a partner's manifest nor an
/// origin's redirect can aim the run at the private network, loopback or a cloud metadata
/// service. Link-local addresses (169.254.0.0/16, fe80::/10: where metadata services answer)
/// are refused unless ``allowLinkLocal``. Through a proxy, the connection is the proxy's, and
/// so is the address checked.
public struct AddressRules: Sendable, Equatable {
  /// Refused on top of link-local: named ranges and CIDR blocks (job:
  /// `prefetch.denyAddresses`; `--deny-addresses`).
  public var denied: [AddressRange] = []
  /// Link-local addresses are reached too (job: `prefetch.allowLinkLocal`;
  /// `--allow-link-local`).
  public var allowLinkLocal = false

  public init() {}

  /// The names `--deny-addresses` and `prefetch.denyAddresses` take besides CIDR blocks, and
  /// the ranges each stands for.
  public static let namedRanges: [String: [String]] = [
    "private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"],
    "loopback": ["127.0.0.0/8", "::1/128"],
    "link-local": ["169.254.0.0/16", "fe80::/10"],
  ]

  /// The ranges of `items` (`private`, `loopback`, `link-local`, `10.0.0.0/8`,
  /// `2001:db8::/32`, a single address), or what is wrong with the first that is none.
  public static func parse(_ items: [String]) -> Result<[AddressRange], AddressRuleError> {
    var ranges: [AddressRange] = []
    for item in items.map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
      if let named = namedRanges[item.lowercased()] {
        ranges += named.compactMap { AddressRange(cidr: $0, rule: item.lowercased()) }
      } else if let range = AddressRange(cidr: item, rule: item) {
        ranges.append(range)
      } else {
        return .failure(AddressRuleError(item: item))
      }
    }
    return .success(ranges)
  }

  /// The rule that refuses `address` (4 or 16 bytes, in network order), if any.
  public func rule(refusing address: [UInt8]) -> String? {
    let address = AddressRange.unmapped(address)
    if !allowLinkLocal,
      let rule = Self.linkLocal.first(where: { $0.contains(address) })
    {
      return rule.rule
    }
    return denied.first(where: { $0.contains(address) })?.rule
  }

  private static let linkLocal = namedRanges["link-local"]!.compactMap {
    AddressRange(cidr: $0, rule: "link-local")
  }
}

/// An item of an address rule list that is neither a known name nor a CIDR block.
public struct AddressRuleError: Error, Sendable, CustomStringConvertible {
  public let item: String
  public var description: String {
    "\"\(item)\" is not private, loopback, link-local or an address block such as 10.0.0.0/8 "
      + "or fd00::/8"
  }
}

/// A block of addresses, IPv4 or IPv6, and the rule that named it.
public struct AddressRange: Sendable, Equatable {
  /// The network's bytes: 4 (IPv4) or 16 (IPv6).
  let network: [UInt8]
  let prefixLength: Int
  /// As the user named it: `private`, `10.0.0.0/8`.
  public let rule: String

  /// `cidr`: an address with an optional `/length` (none: the address alone).
  init?(cidr: String, rule: String) {
    let parts = cidr.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count <= 2, let network = Self.bytes(of: String(parts[0])) else { return nil }
    let maximum = network.count * 8
    if parts.count == 2 {
      guard let length = Int(parts[1]), (0...maximum).contains(length),
        parts[1].allSatisfy(\.isASCII)
      else { return nil }
      prefixLength = length
    } else {
      prefixLength = maximum
    }
    self.network = network
    self.rule = rule
  }

  /// Whether `address` (of the same family; an IPv4 block never holds an IPv6 address) is in
  /// the block.
  func contains(_ address: [UInt8]) -> Bool {
    guard address.count == network.count else { return false }
    var remaining = prefixLength
    for (byte, networkByte) in zip(address, network) where remaining > 0 {
      let bits = min(8, remaining)
      let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
      guard byte & mask == networkByte & mask else { return false }
      remaining -= bits
    }
    return true
  }

  /// An IPv4-mapped IPv6 address (`::ffff:169.254.169.254`) as the IPv4 address it reaches.
  static func unmapped(_ address: [UInt8]) -> [UInt8] {
    guard address.count == 16, address[0..<10].allSatisfy({ $0 == 0 }),
      address[10] == 0xFF, address[11] == 0xFF
    else { return address }
    return Array(address[12...])
  }

  /// The bytes of an IPv4 or IPv6 address in text, as `inet_pton` reads it.
  static func bytes(of text: String) -> [UInt8]? {
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 {
      return withUnsafeBytes(of: &v4) { Array($0) }
    }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 {
      return withUnsafeBytes(of: &v6) { Array($0) }
    }
    return nil
  }

  /// An address's bytes as text.
  static func text(of address: [UInt8]) -> String {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
    let family = address.count == 4 ? AF_INET : AF_INET6
    _ = address.withUnsafeBytes {
      inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count))
    }
    return String(cString: buffer)
  }
}
