import Core
import Runner

extension Job {
  /// A job that prefetches `manifests` and nothing else: no maintenance pass, no retry (a
  /// failure is the test's answer at once).
  static func manifestsOnly(
    _ name: String, location: CacheLocation, _ manifests: [String],
    _ configure: (inout Job) -> Void = { _ in }
  ) -> Job {
    var job = Job(name: name, location: location)
    job.manifests = manifests
    job.passes = []
    job.prefetch.retries = 0
    configure(&job)
    return job
  }
}
