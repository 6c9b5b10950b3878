/// The tool's version: `--version`, and the `User-Agent` of downloads (SPEC section 2).
package enum ImageCacheVersion {
  package static let current = "0.1.0"
}
