import Foundation

/// How deep `imagecache verify` looks into a cache file (`--level`).
public enum VerifyLevel: String, Sendable, Codable, CaseIterable {
  /// The magic bytes and the header: JPEG's segments up to its frame header, PNG's signature
  /// and IHDR chunk, GIF's screen descriptor. Reads the start of each file only.
  case header
  /// The container walked end to end, as the prefetch's `structure` validation does: JPEG's
  /// segments and scans to the EOI marker, every PNG chunk and its CRC to IEND, every GIF
  /// block to the trailer, WebP's RIFF size, ISO media's boxes...
  case structure
  /// The structure, then every JPEG, PNG, GIF and WebP (every frame) decoded as the prefetch's
  /// `full` validation does (libjpeg-turbo, libpng, giflib, libwebp; a warning fails): damage
  /// inside the entropy-coded or compressed data, which the structure walk does not look into.
  /// Other formats: the structure only.
  case full
}

/// What `verify` does with a bad file (`--repair`).
public enum VerifyRepair: String, Sendable, Codable, CaseIterable {
  /// Nothing: the report only.
  case none
  /// Moved by rename into `.imagecache/quarantine/<date>/`, where SD never looks.
  case quarantine
  /// Unlinked.
  case delete
  /// Downloaded again from the URL the state knows for it, through the prefetch's pipeline
  /// (validated, then stored atomically in its place); quarantined when no URL is known or
  /// the download fails.
  case refetch
}

/// What `verify` concluded of one file.
public enum VerifyOutcome: String, Sendable, Codable, CaseIterable {
  /// An image SD reads, under a name SD gives a key.
  case ok
  /// Nothing an app reading the cache would fail on, but worth a look: a legacy name, an
  /// extension that contradicts the content, a temporary or foreign file.
  case note
  /// An app reading it gets no image: empty, truncated, corrupt, not an image at all.
  case bad
}

/// One file `verify` did not find plainly `ok`, as its report lists it.
public struct VerifiedFile: Sendable, Codable, Equatable {
  /// The path relative to the namespace folder (a file name, but for subfolders').
  package var name: String
  /// Bytes (the file's length).
  package var size: UInt64
  package var modifiedAt: Date
  package var outcome: VerifyOutcome
  /// Why a `bad` file is bad.
  package var reason: String?
  /// What is worth a look, `bad` or not.
  package var notes: [String]
  /// The URL the file was downloaded from (its password masked), when the state knows it:
  /// for `bad` files only.
  package var url: String?

  public init(
    name: String, size: UInt64, modifiedAt: Date, outcome: VerifyOutcome, reason: String? = nil,
    notes: [String] = [], url: String? = nil
  ) {
    self.name = name
    self.size = size
    self.modifiedAt = modifiedAt
    self.outcome = outcome
    self.reason = reason
    self.notes = notes
    self.url = url
  }
}

/// The files `verify` looked at, by outcome.
public struct VerifyCounts: Sendable, Codable, Equatable {
  package var files = 0
  package var ok = 0
  package var note = 0
  package var bad = 0
  /// Entries that could not be read (a folder, a file gone meanwhile): the audit is
  /// incomplete, each is among the errors.
  package var errors = 0

  public init() {}

  package subscript(outcome: VerifyOutcome) -> Int {
    switch outcome {
    case .ok: ok
    case .note: note
    case .bad: bad
    }
  }

  package mutating func count(_ outcome: VerifyOutcome) {
    files += 1
    switch outcome {
    case .ok: ok += 1
    case .note: note += 1
    case .bad: bad += 1
    }
  }
}

/// The `verify` section of a report (`imagecache verify`): how it looked, what it found, and
/// every file that is not plainly `ok`. What a repair did is the `repair` maintenance pass.
package struct VerifyReport: Sendable, Codable, Equatable {
  package var level: VerifyLevel
  package var repair: VerifyRepair
  package var dryRun: Bool
  package var counts: VerifyCounts
  /// Every `bad` and `note` file, in the walk's order.
  package var files: [VerifiedFile]
  /// Entries that could not be read.
  package var errors: [String]

  package init(
    level: VerifyLevel, repair: VerifyRepair, dryRun: Bool = false, counts: VerifyCounts,
    files: [VerifiedFile] = [], errors: [String] = []
  ) {
    self.level = level
    self.repair = repair
    self.dryRun = dryRun
    self.counts = counts
    self.files = files
    self.errors = errors
  }
}
