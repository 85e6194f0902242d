//! A real collector (rotel), fed by child processes of this test binary.

use super::*;

#[test]
fn rotel_receives_spans_and_metrics_over_grpc() {
    one_rank_through("grpc");
}

#[test]
fn rotel_receives_spans_and_metrics_over_http_protobuf() {
    one_rank_through("http/protobuf");
}

#[test]
fn four_ranks_export_to_one_collector() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", rotel.grpc);
    let children: Vec<Child> = (0..4)
        .map(|r| spawn_rank(r, 4, "grpc", &endpoint, work.path()))
        .collect();
    let sent: Vec<usize> = children
        .into_iter()
        .enumerate()
        .map(|(rank, child)| check_report(&rank_report(child, rank as u32), rank as u32))
        .collect();
    let got = rotel.wait_for("the spans of all four ranks", |g| {
        (0..4).all(|r| g.of_rank(r).len() >= sent[r as usize])
    });
    for rank in 0..4 {
        check_rank(&got, rank, 4);
        assert_eq!(
            got.of_rank(rank).len(),
            sent[rank as usize],
            "rank {rank}: nothing twice"
        );
    }
    assert_eq!(
        got.spans.len(),
        sent.iter().sum::<usize>(),
        "nothing from elsewhere"
    );
}

/// The quickstart with `MLLOG_OTEL=1` on four ranks (`RANK=0..3`) into one collector: every
/// rank's run arrives as spans (run, init, block, eval and the traced train_steps) with its
/// rank, and only rank 0 writes an MLLOG file.
#[test]
fn quickstart_on_four_ranks_exports_to_one_collector() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", rotel.grpc);
    let children: Vec<Child> = (0..4)
        .map(|rank| {
            let mut cmd = Command::new(common::quickstart_exe());
            for var in tracing_mllog::env::SUBMISSION_VARIABLES {
                cmd.env_remove(var);
            }
            cmd.env("RANK", rank.to_string())
                .env("WORLD_SIZE", "4")
                .env("MLLOG_OTEL", "1")
                .env("MLLOG_TRACE_STEPS", "1")
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
                .env("OTEL_METRIC_EXPORT_INTERVAL", "500")
                .env(
                    "MLLOG_OUTPUT_FILE",
                    work.path().join(format!("result_rank{rank}.txt")),
                )
                .current_dir(work.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "rank {rank}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let got = rotel.wait_for("every rank's run", |g| {
        (0..4).all(|r| g.of_rank(r).iter().any(|s| s.name == "run"))
    });
    for rank in 0..4 {
        let spans = got.of_rank(rank);
        for name in ["init", "run", "block", "eval", "train_step"] {
            assert!(
                spans.iter().any(|s| s.name == name),
                "rank {rank} has no {name} span"
            );
        }
        let run = spans.iter().find(|s| s.name == "run").unwrap();
        assert_eq!(
            run.res("service.name"),
            Some("Str(llama2_70b_lora)"),
            "{run:?}"
        );
        assert_eq!(run.attr("mllog.key"), Some("Str(run_start)"), "{run:?}");
        let block = spans.iter().find(|s| s.name == "block").unwrap();
        assert_eq!(block.parent, run.id, "block is a child of run");
        let eval = spans.iter().find(|s| s.name == "eval").unwrap();
        assert!(
            eval.events.iter().any(|(n, _)| n == "eval_accuracy"),
            "{eval:?}"
        );
    }
    for rank in 0..4 {
        let file = work.path().join(format!("result_rank{rank}.txt"));
        assert_eq!(
            file.exists(),
            rank == 0,
            "only rank 0 writes MLLOG lines: {}",
            file.display()
        );
    }
}
