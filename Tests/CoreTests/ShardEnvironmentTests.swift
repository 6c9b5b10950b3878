import Core
import XCTest

/// The shard an engine's environment gives a worker (issue 28 item 4): Kubernetes, Slurm and
/// Grid Engine arrays, checked against each other.
final class ShardEnvironmentTests: XCTestCase {
  private func slurm(id: Int, min: Int, max: Int, step: Int, count: Int?) -> [String: String] {
    var environment = [
      "SLURM_ARRAY_TASK_ID": "\(id)", "SLURM_ARRAY_TASK_MIN": "\(min)",
      "SLURM_ARRAY_TASK_MAX": "\(max)", "SLURM_ARRAY_TASK_STEP": "\(step)",
    ]
    environment["SLURM_ARRAY_TASK_COUNT"] = count.map { "\($0)" }
    return environment
  }

  private func shards(_ environment: [[String: String]], _ count: ShardCount) throws -> [Shard?] {
    try environment.map { try Shard.fromEnvironment($0, count: count) }
  }

  private func problem(_ environment: [String: String], _ count: ShardCount = .auto) -> String {
    do {
      let shard = try Shard.fromEnvironment(environment, count: count)
      return "accepted as \(String(describing: shard))"
    } catch {
      return error.description
    }
  }

  func testSlurmArraysFromZeroFromOneAndWithAStepAreShardsZeroToNMinusOne() throws {
    let expected = (0..<4).map { Shard(index: $0, count: 4) }
    // --array=0-3
    XCTAssertEqual(
      try shards((0...3).map { slurm(id: $0, min: 0, max: 3, step: 1, count: 4) }, .auto),
      expected)
    // --array=1-4, with --shards 4 given too
    XCTAssertEqual(
      try shards((1...4).map { slurm(id: $0, min: 1, max: 4, step: 1, count: 4) }, .fixed(4)),
      expected)
    // --array=0-6:2
    XCTAssertEqual(
      try shards(
        stride(from: 0, through: 6, by: 2).map { slurm(id: $0, min: 0, max: 6, step: 2, count: 4) },
        .auto),
      expected)
    // Without _COUNT or _STEP (older Slurm): step 1.
    XCTAssertEqual(
      try Shard.fromEnvironment(
        ["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4"],
        count: .auto),
      Shard(index: 2, count: 4))
  }

  func testInconsistentSlurmVariablesAreRefusedNamingTheVariableAndValue() {
    // --array=1,2,5: three tasks, but MIN-MAX spans five.
    XCTAssertTrue(
      problem(slurm(id: 2, min: 1, max: 5, step: 1, count: 3)).contains(
        "SLURM_ARRAY_TASK_COUNT': 3 tasks"),
      problem(slurm(id: 2, min: 1, max: 5, step: 1, count: 3)))
    let wrongN = problem(slurm(id: 1, min: 0, max: 3, step: 1, count: 4), .fixed(3))
    XCTAssertTrue(wrongN.contains("--shards 3, but the Slurm array has 4 tasks"), wrongN)
    let offStep = problem(slurm(id: 3, min: 0, max: 6, step: 2, count: 4))
    XCTAssertTrue(offStep.contains("SLURM_ARRAY_TASK_ID': 3 is not a task"), offStep)
    let outside = problem(slurm(id: 9, min: 0, max: 3, step: 1, count: 4))
    XCTAssertTrue(outside.contains("SLURM_ARRAY_TASK_ID': 9 is not a task"), outside)
  }

  func testNonNumbersAreRefusedNamingTheVariableAndValue() {
    var environment = slurm(id: 1, min: 0, max: 3, step: 1, count: 4)
    environment["SLURM_ARRAY_TASK_STEP"] = "two"
    XCTAssertTrue(
      problem(environment).contains("SLURM_ARRAY_TASK_STEP': \"two\" is not a whole number"),
      problem(environment))
    environment = slurm(id: 1, min: 0, max: 3, step: 1, count: 4)
    environment["SLURM_ARRAY_TASK_ID"] = "-1"
    XCTAssertTrue(
      problem(environment).contains("SLURM_ARRAY_TASK_ID': \"-1\""), problem(environment))
    environment["SLURM_ARRAY_TASK_ID"] = "1"
    environment["SLURM_ARRAY_TASK_MAX"] = nil
    XCTAssertTrue(
      problem(environment).contains("SLURM_ARRAY_TASK_MAX': not set"), problem(environment))
    XCTAssertTrue(
      problem(["JOB_COMPLETION_INDEX": "x"], .fixed(4)).contains(
        "JOB_COMPLETION_INDEX': \"x\" is invalid"))
    XCTAssertTrue(
      problem(["JOB_COMPLETION_INDEX": "4"], .fixed(4)).contains("from 0 to 3"))
  }

  func testKubernetesNeedsNAndGridEngineArraysAreShardsToo() throws {
    XCTAssertEqual(
      try Shard.fromEnvironment(["JOB_COMPLETION_INDEX": "2"], count: .fixed(4)),
      Shard(index: 2, count: 4))
    XCTAssertTrue(problem(["JOB_COMPLETION_INDEX": "2"]).contains("--shards N"))
    // qsub -t 1-7:2
    let grid = [
      "SGE_TASK_ID": "5", "SGE_TASK_FIRST": "1", "SGE_TASK_LAST": "7", "SGE_TASK_STEPSIZE": "2",
    ]
    XCTAssertEqual(try Shard.fromEnvironment(grid, count: .auto), Shard(index: 2, count: 4))
    // Outside an array job Grid Engine says `undefined`; no engine is no shard.
    XCTAssertNil(try Shard.fromEnvironment(["SGE_TASK_ID": "undefined"], count: .auto))
    XCTAssertNil(try Shard.fromEnvironment([:], count: .fixed(2)))
  }

  /// Issue 40: rerunning one shard the obvious way. With N given, an array of another size is a
  /// rerun: K = task ID - the fleet's first task ID (Grid Engine's start at 1; a Slurm array's
  /// must be given, as 0 and 1 are both common); with `auto`, one task is refused.
  func testARerunOfOneTaskWithNGivenRunsExactlyThatShard() throws {
    // qsub -t 3 of a fleet qsub -t 1-4: shard 2.
    let grid = ["SGE_TASK_ID": "3", "SGE_TASK_FIRST": "3", "SGE_TASK_LAST": "3"]
    XCTAssertEqual(try Shard.fromEnvironment(grid, count: .fixed(4)), Shard(index: 2, count: 4))
    // sbatch --array=2 of a fleet --array=1-4 or --array=0-3.
    let slurm = slurm(id: 2, min: 2, max: 2, step: 1, count: 1)
    XCTAssertEqual(
      try Shard.fromEnvironment(slurm, count: .fixed(4), firstTask: 1), Shard(index: 1, count: 4))
    XCTAssertEqual(
      try Shard.fromEnvironment(slurm, count: .fixed(4), firstTask: 0), Shard(index: 2, count: 4))
    XCTAssertTrue(
      problem(slurm, .fixed(4)).contains("give --first-task"), problem(slurm, .fixed(4)))
    // A task past the fleet.
    XCTAssertThrowsError(
      try Shard.fromEnvironment(slurm, count: .fixed(2), firstTask: 0)
    ) { error in
      XCTAssertTrue("\(error)".contains("not a task of a fleet of 2 shards"), "\(error)")
    }
    // auto cannot tell a rerun from a fleet of one.
    XCTAssertTrue(problem(slurm).contains("give --shards N"), problem(slurm))
    XCTAssertTrue(problem(grid).contains("give --shards N"), problem(grid))
    // The whole fleet's array with --first-task: checked against it.
    XCTAssertEqual(
      try Shard.fromEnvironment(
        self.slurm(id: 4, min: 1, max: 4, step: 1, count: 4), count: .fixed(4), firstTask: 1),
      Shard(index: 3, count: 4))
    XCTAssertThrowsError(
      try Shard.fromEnvironment(
        self.slurm(id: 4, min: 1, max: 4, step: 1, count: 4), count: .fixed(4), firstTask: 0))
  }
}
