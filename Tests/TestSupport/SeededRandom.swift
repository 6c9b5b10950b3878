/// SplitMix64: a small generator that gives the same sequence on every machine, so that a
/// failing case of a randomised test can be replayed from its seed.
public struct SeededRandom: RandomNumberGenerator {
  public var state: UInt64

  public init(seed: UInt64) { state = seed }

  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A number in `0..<bound` from one draw, by remainder: slightly uneven, but one draw a
  /// number, so a seed replays the same cases (`Int.random(in:using:)` may draw again).
  public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
