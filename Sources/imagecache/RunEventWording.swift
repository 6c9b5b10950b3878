import Core
import Foundation
import Maintenance
import Runner

/// How the command line words a run's events: the one place a console line of a run is
/// written, so that a line can be changed without touching the runner.
extension RunEvent {
  var wording: String {
    switch self {
    case .waitingForLock(let job, let holder, let timeout):
      "\(job): waiting for \(holder?.description ?? "another run") to finish"
        + (timeout.map { " (at most \(Int($0)) s)" } ?? "")
    case .runStarted(let job, let cachePath, let created, let dryRun):
      "\(job): cache \(cachePath)"
        + (!created
          ? ""
          : dryRun
            ? " (new: it does not exist yet; a real run creates it)"
            : " (new: it did not exist and was created)")
    case .warning(let warning): "warning: \(warning)"
    case .staleTemporariesSwept(let job, let count, let bytes, let dryRun):
      "\(job): \(RunWarning.staleTemporaries(count: count, bytes: bytes, dryRun: dryRun))"
    case .lineSkipped(let message): "skipped \(message)"
    case .inputFailed(let message): "  failed input \(message)"
    case .urlFailed(let failure):
      "  failed \(failure.url): \(failure.name)\(failure.httpStatus.map { " \($0)" } ?? "")"
        + (failure.blacklisted ? " (blacklisted)" : "")
    case .furtherFailuresInReportOnly: "  ... further failures are in the report only"
    case .failureCause(let message): "    \(message)"
    case .variantSkipped(let url, let reason): "  no variant for \(url): \(reason)"
    case .hostLimitSettled(let limit):
      "  \(limit.host): per-host concurrency settled at \(limit.final) (least \(limit.min), "
        + "median \(limit.median), most \(limit.max)"
        + (limit.cuts.isEmpty
          ? ""
          : "; cut for "
            + limit.cuts.keys.sorted().map { "\($0) \(limit.cuts[$0]!)" }.joined(separator: ", "))
        + (limit.heldUnder.map {
          "; held under \($0), where it refused an earlier run: see imagecache refusals list"
        } ?? "")
        + "); to fix it: --per-host-concurrency \(limit.median)"
    case .planned(let planned):
      "\(planned.action.rawValue) \(planned.url)" + (planned.reason.map { ": \($0)" } ?? "")
    case .prefetchFinished(let job, let counts, let refusal):
      "\(job): \(counts.total) URLs: \(counts.downloaded) downloaded, "
        + "\(counts.memoryHits + counts.diskHits) hits, \(counts.notModified) not modified, "
        + "\(counts.failed) failed, \(counts.blacklisted) blacklisted, \(counts.skipped) skipped, "
        + (counts.inputsFailed > 0 ? "\(counts.inputsFailed) inputs failed, " : "")
        + (counts.derived > 0 ? "\(counts.derived) variants, " : "")
        + "\(formatBytes(counts.bytesDownloaded)) in \(Int(counts.durationSeconds * 1000)) ms"
        + (refusal.map { "; \($0)" } ?? "")
    case .planFinished(let job, let plan):
      "\(job) (dry run): \(plan.total) URLs: \(plan.hit) hits, \(plan.download) would "
        + "download, \(plan.revalidate) would revalidate, \(plan.blacklisted) blacklisted, "
        + "\(plan.invalid) invalid, \(plan.miss) not in the cache (fromCacheOnly), "
        + (plan.failed > 0 ? "\(plan.failed) would fail, " : "") + "\(plan.skipped) skipped"
        + (plan.inputsFailed > 0 ? ", \(plan.inputsFailed) inputs failed" : "")
        + "; no image requested, nothing written"
    case .noLegacyFolder(let path): "migrate: no legacy folder at \(path): nothing to merge"
    case .legacyFolderMerged(let path): "migrate: removed \(path): every file in it was merged"
    case .noCleaningPasses(let job, let passes):
      "\(job): limits: "
        + (passes.isEmpty ? "no maintenance passes listed" : "no expire or trim pass listed")
        + ": nothing is expired or trimmed (list them with maintenance: [expire, trim])"
    case .maintenanceLimits(let configuration, let expires, let trims):
      Self.limits(configuration, expires: expires, trims: trims)
    case .passAction(let action, let pass): Self.describe(action, in: pass)
    case .passError(let pass, let message): "\(pass.rawValue): error: \(message)"
    case .passFinished(let pass): Self.describe(pass)
    case .verifiedFile(let file): Self.describe(file)
    case .furtherBadFilesInReportOnly: "verify: ... further bad files are in the report only"
    case .verifyError(let message): "verify: error: \(message)"
    case .verifyFinished(let job, let counts, let level):
      "\(job): verified \(counts.files) files (\(level.rawValue)): \(counts.ok) ok, "
        + "\(counts.note) with notes, \(counts.bad) bad"
        + (counts.errors == 0 ? "" : ", \(counts.errors) entries not read")
    case .interrupted(let job, let signal):
      "\(job): interrupted by signal \(signal): stopped after the work in hand"
    case .timeLimitReached(let job, let seconds):
      "\(job): interrupted: the run's time limit (\(Int(seconds)) s, maxRunTime) was reached; "
        + "stopped after the work in hand, URLs not started are left for the next run"
    case .runFailed(let job, let error): "\(job): failed: \(error)"
    case .reportNotWritten(let job, let error): "\(job): could not write the report: \(error)"
    case .reportWritten(let job, let path): "\(job): report written to \(path)"
    case .metricsWritten(let job, let path): "\(job): metrics written to \(path)"
    }
  }

  /// The limits the expire and trim passes run with, said before they start: a pass with no
  /// limit set still expires by the default age, and nobody should have to guess that.
  private static func limits(_ configuration: CleanupConfiguration, expires: Bool, trims: Bool)
    -> String
  {
    var parts: [String] = []
    if expires {
      let age = configuration.maxDiskAge
      parts.append(
        age < 0
          ? "expire: off (negative max age)"
          : "expire: files whose \(configuration.expireType.rawValue) is more than "
            + "\(formatDuration(age)) old"
            + (configuration.maxDiskAgeIsStated
              ? "" : " (SD's default: the job lists expire and sets no cache.maxDiskAge)"))
    } else {
      parts.append("expire: not run")
    }
    if trims {
      let size = configuration.maxDiskSize
      parts.append(
        size == 0
          ? "trim: off (no max size)"
          : "trim: when over \(formatBytes(size)), oldest first to below \(formatBytes(size / 2))")
    } else {
      parts.append("trim: not run")
    }
    if let limit = configuration.maxDelete { parts.append("at most \(limit) deleted") }
    return "limits: " + parts.joined(separator: "; ")
  }

  /// `verify: bad: 0a1b....jpg (1.2 KB): jpeg: truncated...; notes: ...`
  private static func describe(_ file: VerifiedFile) -> String {
    var line = "verify: \(file.outcome.rawValue): \(file.name) (\(formatBytes(file.size)))"
    if let reason = file.reason { line += ": \(reason)" }
    if !file.notes.isEmpty {
      line += (file.reason == nil ? ": " : "; ") + file.notes.joined(separator: "; ")
    }
    return line
  }

  /// A line for one action of a pass: `expire: would delete a/b.jpg (4.1 KB)`.
  private static func describe(_ action: MaintenanceAction, in pass: PassSummary) -> String {
    let verb = pass.dryRun ? "would " : ""
    let name = pass.pass.rawValue
    switch action.kind {
    case .delete:
      return "\(name): \(verb)delete \(action.path) (\(formatBytes(action.bytes)))"
    case .move:
      return "\(name): \(verb)move \(action.path) -> \(action.destination ?? "")"
        + (action.reason.map { " (\($0))" } ?? "")
    case .keptAside:
      return
        "\(name): \(verb)keep \(action.path) aside as \(action.destination ?? "") (name collision)"
    case .refetch:
      return "\(name): \(verb)refetch \(action.path) from "
        + (action.url ?? "").maskingURLPasswords
    }
  }

  /// The closing line of a pass: `trim (dry run): would remove 3 files, would free 12.3 KB`, or
  /// `trim: removed 3 files, freed 12.3 KB`.
  private static func describe(_ pass: PassSummary) -> String {
    func verb(_ planned: String, _ done: String) -> String {
      pass.dryRun ? "would \(planned)" : done
    }
    let summary: String
    switch pass.pass {
    case .migrate:
      summary =
        "\(verb("move", "moved")) \(pass.filesMoved) files, "
        + "\(verb("keep", "kept")) \(pass.filesKeptAside) aside after a name collision"
    case .repair:
      summary =
        "\(verb("quarantine", "quarantined")) \(pass.filesMoved) files, "
        + "\(verb("delete", "deleted")) \(pass.filesRemoved) files"
        + (pass.filesRefetched + pass.filesNotRefetched == 0
          ? ""
          : ", \(verb("refetch", "refetched")) \(pass.filesRefetched) files"
            + (pass.filesNotRefetched == 0
              ? "" : " (\(pass.filesNotRefetched) failed and were quarantined)"))
        + (pass.filesNotRemoved == 0 ? "" : ", could not repair \(pass.filesNotRemoved) files")
    case .expire, .trim:
      summary =
        "\(verb("remove", "removed")) \(pass.filesRemoved) files, "
        + "\(verb("free", "freed")) \(formatBytes(pass.bytesFreed))"
        + (pass.filesNotRemoved == 0 ? "" : ", could not remove \(pass.filesNotRemoved) files")
    }
    let errors = pass.errorCount == 0 ? "" : ", \(pass.errorCount) errors"
    return "\(pass.pass.rawValue)\(pass.dryRun ? " (dry run)" : ""): \(summary)\(errors)"
  }
}
