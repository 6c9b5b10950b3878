import Core
import Foundation

/// Whether this user may write a cache's state (its `.imagecache` folder, the state files and
/// the locks in it), said in words a user can act on: the usual cause of a state that cannot
/// be written is a cache of another user, which SQLite and `open(2)` only call "readonly
/// database" or "Permission denied" (SPEC section 8).
enum StateAccess {
  /// Why this user cannot write the first of `entries` that it cannot (each one that exists
  /// is looked at, in order): the entry, its owner and permissions or its read-only file
  /// system, and what to do; `nil` when every one that exists can be written.
  static func readOnlyForThisUser(_ entries: [String]) -> String? {
    for entry in entries {
      var info = stat()
      guard stat(entry, &info) == 0, access(entry, W_OK) != 0 else { continue }
      if errno == EROFS {
        return "\(entry) is on a read-only file system: the commands that write the state "
          + "(prefetch, run, blacklist remove and clear) need it mounted read-write; stats, "
          + "blacklist list and dry runs read it as it is"
      }
      let owner = userName(info.st_uid)
      return "the state is read-only for this user (\(userName(getuid()))): \(entry) is owned "
        + "by \(owner), mode \(String(format: "%04o", info.st_mode & 0o7777)); run the command "
        + "as its owner (\(owner)), give this user write access to the cache's .imagecache "
        + "folder and the files in it, or use a cache of its own (--cache)"
    }
    return nil
  }

  private static func userName(_ uid: uid_t) -> String {
    getpwuid(uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(uid)"
  }
}
