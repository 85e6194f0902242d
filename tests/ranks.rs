//! Many ranks on one output path, as a launcher starts them: four child processes (this
//! binary's ignored `rank` test) with the variables torchrun or Open MPI sets, a barrier the
//! test implements over loopback TCP, one rank that sleeps in `init`, ranks that crash, every
//! rank in the README's `while !run.converged()` loop. Rank 0 alone writes, its clock starts
//! only after every rank finished `init` (and, with the barrier before `run_stop`, stops only
//! once every rank finished its run), and its log passes the official checker whatever the
//! other ranks do.

mod common;
mod training;

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::info_span;
use tracing_mllog::barrier::Barrier;
use tracing_mllog::presets::Llama2_70bLora;
use tracing_mllog::record::parse_log;
use tracing_mllog::results::summary::{render_text, summarize_text};
use tracing_mllog::Output;
use tracing_mllog::Submission;
use tracing_mllog::{
    keys, Division, MllogLayer, Record, Ruleset, SystemStatus, Value, WALL_CLOCK_STEP_MS,
};
use tracing_subscriber::prelude::*;

const RANKS: usize = 4;
/// Only a hung child reaches it.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// What each child is told: where the log and the markers go, the barrier's port, and what
/// to do (`sleep_in_init`, `panic_in_init`, `hang_in_run`, `sleep_in_run`, `abort_in_run`, or
/// nothing).
const DIR: &str = "MLLOG_TEST_RANKS_DIR";
const PORT: &str = "MLLOG_TEST_RANKS_PORT";
const ROLE: &str = "MLLOG_TEST_RANKS_ROLE";
const TIMEOUT_MS: &str = "MLLOG_TEST_RANKS_BARRIER_MS";

/// The barrier's coordinator: once `ranks` processes have connected, it answers each with
/// one byte, and the next round begins. A rank that never connects leaves the others to their
/// barrier's timeout.
fn coordinator(ranks: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut waiting: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut rank = [0u8];
            if stream.read_exact(&mut rank).is_ok() {
                waiting.push(stream);
            }
            if waiting.len() == ranks {
                for mut s in waiting.drain(..) {
                    let _ = s.write_all(&[1]);
                }
            }
        }
    });
    port
}

/// Starts one rank with the variables its launcher sets and nothing else of this process's
/// environment (but `PATH`).
fn spawn_rank(rank: usize, dir: &Path, port: u16, launcher: &[(String, String)]) -> Child {
    let out = fs::File::create(dir.join(format!("stdout_{rank}.txt"))).unwrap();
    let err = fs::File::create(dir.join(format!("stderr_{rank}.txt"))).unwrap();
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "rank",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env(DIR, dir)
        .env(PORT, port.to_string())
        .envs(launcher.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("start a rank")
}

/// Starts every rank, each with the variables `vars` gives it.
fn spawn_ranks(dir: &Path, port: u16, vars: impl Fn(usize) -> Vec<(String, String)>) -> Vec<Child> {
    (0..RANKS)
        .map(|rank| spawn_rank(rank, dir, port, &vars(rank)))
        .collect()
}

/// torchrun's variables for `rank` of [`RANKS`] on one node.
fn torchrun(rank: usize) -> Vec<(String, String)> {
    [
        ("RANK", rank.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("WORLD_SIZE", RANKS.to_string()),
        ("LOCAL_WORLD_SIZE", RANKS.to_string()),
        ("GROUP_RANK", "0".into()),
        ("TORCHELASTIC_RUN_ID", "ranks-test".into()),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .to_vec()
}

/// Open MPI's (`mpirun -np 4`).
fn open_mpi(rank: usize) -> Vec<(String, String)> {
    [
        ("OMPI_COMM_WORLD_RANK", rank.to_string()),
        ("OMPI_COMM_WORLD_LOCAL_RANK", rank.to_string()),
        ("OMPI_COMM_WORLD_SIZE", RANKS.to_string()),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .to_vec()
}

fn wait(mut child: Child, rank: usize, dir: &Path) -> (std::process::ExitStatus, String) {
    let deadline = Instant::now() + CHILD_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rank {rank} did not end within {CHILD_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = fs::read_to_string(dir.join(format!("stderr_{rank}.txt"))).unwrap_or_default();
    (status, stderr)
}

fn records(log: &Path) -> Vec<Record> {
    let text = fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let (lines, errors) = parse_log(&text);
    assert!(errors.is_empty(), "{errors:?}");
    lines.into_iter().map(|l| l.record).collect()
}

fn one<'a>(records: &'a [Record], key: &str) -> &'a Record {
    let found: Vec<_> = records.iter().filter(|r| r.key == key).collect();
    assert_eq!(found.len(), 1, "{key} once: {found:?}");
    found[0]
}

/// The time of rank 0's last `eval_stop`: where its own run ended.
fn last_eval_stop(log: &[Record]) -> i64 {
    log.iter()
        .rfind(|r| r.key == keys::EVAL_STOP)
        .expect("an eval_stop")
        .time_ms()
}

fn millis_in(path: &Path) -> i64 {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

/// Every line of the shared file is rank 0's: one of each once-only record, nothing else
/// printed an MLLOG line, and the official checker accepts it.
fn assert_rank_0_alone_wrote(dir: &Path, log: &[Record]) {
    for key in [
        keys::INIT_START,
        keys::INIT_STOP,
        keys::RUN_START,
        keys::RUN_STOP,
    ] {
        one(log, key);
    }
    for rank in 0..RANKS {
        let out = fs::read_to_string(dir.join(format!("stdout_{rank}.txt"))).unwrap();
        assert!(
            !out.contains(":::MLLOG"),
            "rank {rank} printed records:\n{out}"
        );
    }
    let (ok, text) = common::official_check(&dir.join("result_0.txt"), "6.1.0", true);
    assert!(ok, "the official checker rejected rank 0's log:\n{text}");
}

/// Every rank runs the README's loop (`while !run.converged()`) with no cap: each one's run
/// handle converges at the same evaluation as rank 0's, though only rank 0 writes.
#[test]
fn every_rank_leaves_the_readme_loop_at_the_same_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let port = coordinator(RANKS);
    let children: Vec<Child> = (0..RANKS)
        .map(|rank| {
            let mut vars = torchrun(rank);
            vars.push((ROLE.into(), "readme_loop".into()));
            spawn_rank(rank, dir.path(), port, &vars)
        })
        .collect();
    for (rank, child) in children.into_iter().enumerate() {
        let (status, stderr) = wait(child, rank, dir.path());
        assert!(status.success(), "rank {rank}: {status:?}\n{stderr}");
    }
    let log = records(&dir.path().join("result_0.txt"));
    assert_rank_0_alone_wrote(dir.path(), &log);
    let evals_in_log = log.iter().filter(|r| r.key == keys::EVAL_ACCURACY).count();
    for rank in 0..RANKS {
        let seen = fs::read_to_string(dir.path().join(format!("evals_{rank}"))).unwrap();
        // (loop iterations, the handle's evaluations, converged, diverged)
        assert_eq!(
            seen,
            format!("({evals_in_log}, {evals_in_log}, true, false)"),
            "rank {rank}"
        );
    }
}

#[test]
fn rank_0_starts_the_clock_after_every_rank_finished_init() {
    let dir = tempfile::tempdir().unwrap();
    let port = coordinator(RANKS);
    let children = spawn_ranks(dir.path(), port, |rank| {
        let mut vars = torchrun(rank);
        vars.push(("MLLOG_CACHE_CLEAR".into(), "launcher".into()));
        // Every divergence of the wall clock from the log's is said: the log carries the
        // clock-step metadata, which the official checker must accept.
        vars.push(("MLLOG_CLOCK_STEP_MS".into(), "0".into()));
        if rank == 2 {
            vars.push((ROLE.into(), "sleep_in_init".into()));
        }
        vars
    });
    for (rank, child) in children.into_iter().enumerate() {
        let (status, stderr) = wait(child, rank, dir.path());
        assert!(status.success(), "rank {rank}: {status:?}\n{stderr}");
        assert!(
            !stderr.contains("rank variables disagree"),
            "rank {rank}:\n{stderr}"
        );
        assert!(!stderr.contains("barrier"), "rank {rank}:\n{stderr}");
    }
    let log = records(&dir.path().join("result_0.txt"));
    assert_rank_0_alone_wrote(dir.path(), &log);
    let slept_until = millis_in(&dir.path().join("init_end_2"));
    let init_stop = one(&log, keys::INIT_STOP).time_ms();
    let run_start = one(&log, keys::RUN_START).time_ms();
    assert!(
        init_stop + 1000 < slept_until,
        "rank 0 ended init ({init_stop}) well before rank 2 did ({slept_until})"
    );
    assert!(
        run_start + CROSS_PROCESS_SKEW_MS >= slept_until,
        "run_start ({run_start}) is before rank 2's end of init ({slept_until})"
    );
    let stepped = log
        .iter()
        .filter(|r| r.metadata.get(WALL_CLOCK_STEP_MS).is_some())
        .count();
    assert!(stepped > 0, "no record carries {WALL_CLOCK_STEP_MS}");
    let text = fs::read_to_string(dir.path().join("result_0.txt")).unwrap();
    let summary = summarize_text("result_0.txt", &text);
    assert!(summary.wall_clock_step_ms.is_some());
    assert!(render_text(&[summary]).contains("result_0.txt: the wall clock stepped"));
    let cache = one(&log, keys::CACHE_CLEAR);
    assert_eq!(cache.value, Value::Bool(true));
    assert_eq!(
        cache.metadata.get("cleared_by").and_then(Value::as_str),
        Some("launcher")
    );
}

#[test]
fn crashed_ranks_do_not_damage_rank_0s_log() {
    let dir = tempfile::tempdir().unwrap();
    let port = coordinator(RANKS);
    let mut children: Vec<Option<Child>> = (0..RANKS)
        .map(|rank| {
            let mut vars = open_mpi(rank);
            vars.push((TIMEOUT_MS.into(), "3000".into()));
            match rank {
                // Gone before the barrier: the others wait out their timeout.
                3 => vars.push((ROLE.into(), "panic_in_init".into())),
                // Killed in the middle of the run.
                1 => vars.push((ROLE.into(), "hang_in_run".into())),
                _ => {}
            }
            Some(spawn_rank(rank, dir.path(), port, &vars))
        })
        .collect();
    // Rank 1 is killed while rank 0's run is open (rank 0 waits for the `killed` marker).
    let in_run = dir.path().join("in_run_1");
    let deadline = Instant::now() + CHILD_TIMEOUT;
    while !in_run.exists() {
        assert!(Instant::now() < deadline, "rank 1 never reached its run");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rank_1 = children[1].take().unwrap();
    rank_1.kill().unwrap();
    let killed = rank_1.wait().unwrap();
    assert!(!killed.success());
    fs::write(dir.path().join("killed"), "").unwrap();

    let mut stderr_0 = String::new();
    for (rank, child) in children.into_iter().enumerate() {
        let Some(child) = child else { continue };
        let (status, stderr) = wait(child, rank, dir.path());
        match rank {
            3 => assert_eq!(status.code(), Some(101), "rank 3 panics:\n{stderr}"),
            _ => {
                assert!(status.success(), "rank {rank}: {status:?}\n{stderr}");
                assert!(
                    stderr.contains("did not complete within 3s"),
                    "rank {rank} reports the barrier's timeout:\n{stderr}"
                );
            }
        }
        if rank == 0 {
            stderr_0 = stderr;
        }
    }
    let log = records(&dir.path().join("result_0.txt"));
    assert_rank_0_alone_wrote(dir.path(), &log);
    assert_eq!(
        one(&log, keys::RUN_STOP)
            .metadata
            .get("status")
            .and_then(Value::as_str),
        Some("success")
    );
    // Nobody said the cache was cleared: the log says `false`, the report says why.
    assert_eq!(one(&log, keys::CACHE_CLEAR).value, Value::Bool(false));
    assert!(
        stderr_0.contains("nothing was cleared by this process"),
        "{stderr_0}"
    );
}

#[test]
fn rank_0_stops_the_clock_after_every_rank_finished_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let port = coordinator(RANKS);
    let children = spawn_ranks(dir.path(), port, |rank| {
        let mut vars = torchrun(rank);
        vars.push(("MLLOG_RUN_STOP_BARRIER".into(), "1".into()));
        if rank == 2 {
            vars.push((ROLE.into(), "sleep_in_run".into()));
        }
        vars
    });
    for (rank, child) in children.into_iter().enumerate() {
        let (status, stderr) = wait(child, rank, dir.path());
        assert!(status.success(), "rank {rank}: {status:?}\n{stderr}");
        assert!(!stderr.contains("barrier"), "rank {rank}:\n{stderr}");
    }
    let log = records(&dir.path().join("result_0.txt"));
    assert_rank_0_alone_wrote(dir.path(), &log);
    let slept_until = millis_in(&dir.path().join("run_end_2"));
    let last_eval = last_eval_stop(&log);
    let run_stop = one(&log, keys::RUN_STOP);
    assert!(
        last_eval + 1000 < slept_until,
        "rank 0 ended its run ({last_eval}) well before rank 2 did ({slept_until})"
    );
    assert!(
        run_stop.time_ms() + CROSS_PROCESS_SKEW_MS >= slept_until,
        "run_stop ({}) is before rank 2's end of its run ({slept_until})",
        run_stop.time_ms()
    );
    assert_eq!(
        run_stop.metadata.get("status").and_then(Value::as_str),
        Some("success")
    );
}

#[test]
fn a_rank_lost_in_its_run_leaves_rank_0_its_run_stop_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let port = coordinator(RANKS);
    // Nobody is killed here: rank 0 trains as soon as its run opens.
    fs::write(dir.path().join("killed"), "").unwrap();
    let children = spawn_ranks(dir.path(), port, |rank| {
        let mut vars = open_mpi(rank);
        vars.push((TIMEOUT_MS.into(), "3000".into()));
        vars.push(("MLLOG_RUN_STOP_BARRIER".into(), "1".into()));
        if rank == 3 {
            // Gone after the barrier before run_start, before the one before run_stop.
            vars.push((ROLE.into(), "abort_in_run".into()));
        }
        vars
    });
    for (rank, child) in children.into_iter().enumerate() {
        let (status, stderr) = wait(child, rank, dir.path());
        if rank == 3 {
            assert!(!status.success(), "rank 3 aborts:\n{stderr}");
            continue;
        }
        assert!(status.success(), "rank {rank}: {status:?}\n{stderr}");
        assert!(
            !stderr.contains("the barrier before run_start"),
            "rank {rank}:\n{stderr}"
        );
        assert!(
            stderr.contains(
                "the barrier before run_stop did not complete within 3s (a rank still \
                 training, or one that is gone)"
            ),
            "rank {rank} reports the timeout of the barrier before run_stop:\n{stderr}"
        );
    }
    let log = records(&dir.path().join("result_0.txt"));
    assert_rank_0_alone_wrote(dir.path(), &log);
    let last_eval = last_eval_stop(&log);
    let run_stop = one(&log, keys::RUN_STOP);
    let waited = run_stop.time_ms() - last_eval;
    assert!(
        (2_900..5_000).contains(&waited),
        "run_stop comes {waited} ms after the last eval_stop, not the 3 s timeout"
    );
    assert_eq!(
        run_stop.metadata.get("status").and_then(Value::as_str),
        Some("success")
    );
}

/// Writes the wall-clock time now, in milliseconds, to `path` (read by [`millis_in`]).
/// How far rank 0's log clock and another rank's wall clock may disagree about one instant.
/// The log's time is the monotonic clock plus a wall-clock offset taken once per process, and
/// `mark_time` reads the wall clock, which NTP slews away from the monotonic one meanwhile:
/// a few milliseconds apart on a virtual machine. A rank that did not wait at the barrier
/// would be off by the 1.5 s the other rank sleeps.
const CROSS_PROCESS_SKEW_MS: i64 = 100;

fn mark_time(path: &Path) {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    fs::write(path, now_ms.to_string()).unwrap();
}

/// One rank: the converging `llama2_70b_lora` run of tests/exit_paths.rs, with the barrier.
#[test]
#[ignore = "a rank process started by the tests above"]
fn rank() {
    let dir = PathBuf::from(std::env::var_os(DIR).expect("started by a parent test"));
    let port: u16 = std::env::var(PORT).unwrap().parse().unwrap();
    let role = std::env::var(ROLE).unwrap_or_default();
    let timeout = std::env::var(TIMEOUT_MS)
        .ok()
        .map(|ms| Duration::from_millis(ms.parse().unwrap()))
        .unwrap_or(Duration::from_secs(60));
    const CONVERGE_AT: u64 = 3;
    let preset = Llama2_70bLora::default()
        .preset(Division::Closed, Ruleset::V6_1_0)
        .expect("preset");
    let (layer, _guard) = MllogLayer::builder()
        .preset(&preset)
        .output(Output::file(dir.join("result_0.txt")))
        .submission(
            Submission::default()
                .status(SystemStatus::Research)
                .org("RanksOrg")
                .platform("1xTestNode-4xGPU")
                .config_filename("ranks.rs")
                .precision("bfloat16", "bfloat16", "bfloat16")
                .parallelism(1, 1, 1, 1)
                .micro_batch_size(1),
        )
        .seed(1234)
        .barrier(
            Barrier::new(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the coordinator");
                s.write_all(&[0]).unwrap();
                let mut go = [0u8];
                s.read_exact(&mut go).expect("released by the coordinator");
            })
            .timeout(Some(timeout)),
        )
        // MLLOG_CLOCK_STEP_MS, as a launcher sets it.
        .from_env()
        .build()
        .expect("build");
    let writes = layer.writes();
    let handle = layer.run_handle();
    tracing_subscriber::registry().with(layer).init();

    let init = info_span!("init").entered();
    match role.as_str() {
        "sleep_in_init" => std::thread::sleep(Duration::from_millis(1500)),
        "panic_in_init" => panic!("this rank fails while it initialises"),
        _ => {}
    }
    let rank = std::env::var("RANK")
        .or_else(|_| std::env::var("OMPI_COMM_WORLD_RANK"))
        .unwrap();
    mark_time(&dir.join(format!("init_end_{rank}")));
    drop(init);

    let run = info_span!("run").entered();
    if role == "hang_in_run" {
        fs::write(dir.join("in_run_1"), "").unwrap();
        std::thread::sleep(CHILD_TIMEOUT);
    }
    if writes && std::env::var(TIMEOUT_MS).is_ok() {
        let deadline = Instant::now() + CHILD_TIMEOUT;
        while !dir.join("killed").exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let mut trained = 0;
    let mut n = 0;
    // The README's loop, `while !run.converged()`, with no cap of its own: a rank whose handle
    // never converged would train until the parent kills it.
    let readme_loop = role == "readme_loop";
    while if readme_loop {
        !handle.converged()
    } else {
        n < CONVERGE_AT
    } {
        let _eval = training::block_and_eval(&preset, n, CONVERGE_AT, &mut trained);
        n += 1;
    }
    assert!(!writes || handle.converged(), "rank 0's run converges");
    let seen = (n, handle.evals(), handle.converged(), handle.diverged());
    fs::write(dir.join(format!("evals_{rank}")), format!("{seen:?}")).unwrap();
    match role.as_str() {
        "sleep_in_run" => std::thread::sleep(Duration::from_millis(1500)),
        "abort_in_run" => std::process::abort(),
        _ => {}
    }
    mark_time(&dir.join(format!("run_end_{rank}")));
    drop(run);
}
