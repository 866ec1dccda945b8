//! Fault containment at the guest level for JavaScript and Python plugins
//! (I7): the deliberately faulty guests in plugins/testing/ loop forever, throw
//! or crash beside a healthy guest in the same engine. A throw is a handler
//! error and the instance carries on; a loop is stopped by fuel or by the epoch
//! deadline as a trap; an uncaught Python exception is a trap; a trapped
//! instance cannot be entered again, and a fresh instance of the same component
//! works; the healthy neighbour handles every event throughout.

use crate::polyglot_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use polyglot_support::*;
use serde_json::json;
use wasmtime::component::Component;
use wasmtime::{Engine, Trap};

const PODS: &str = "v1/pods";

fn pods(n: usize) -> Vec<Cached> {
    (0..n)
        .map(|i| {
            cached(
                PODS,
                &json!({"metadata": {"namespace": "ns", "name": format!("p{i}"), "resourceVersion": format!("{i}")},
                        "spec": {"containers": [{"name": "c", "image": "registry.corp.example/x:1"}]}}),
            )
        })
        .collect()
}

fn trap_of(e: &wasmtime::Error) -> Option<Trap> {
    e.downcast_ref::<Trap>().copied()
}

struct Fixture {
    engine: Engine,
    faulty: Component,
    healthy: Component,
}

fn fixture(faulty: &str) -> Fixture {
    let engine = engine(Some(&test_cache_dir()));
    let (faulty, _) = load(&engine, &plugin_path(faulty));
    // The healthy neighbour is the same JS guest in mode "ok".
    let (healthy, _) = load(&engine, &plugin_path("js-faulty"));
    Fixture {
        engine,
        faulty,
        healthy,
    }
}

fn guest(f: &Fixture, component: &Component, config: &str, cache: &[Cached]) -> Guest {
    let mut g = Guest::new(&f.engine, component, cache.to_vec(), &[PODS]);
    g.init(config).expect("init");
    g
}

/// Runs the faulty guest over `events` beside a healthy one, replacing the
/// faulty instance after every trap, and returns (handler errors, traps).
fn run_beside_healthy(
    f: &Fixture,
    config: &str,
    events: &[Cached],
    tune: impl Fn(&mut Guest),
) -> (Vec<String>, Vec<Trap>) {
    let mut healthy = guest(f, &f.healthy, r#"{"mode":"ok"}"#, events);
    let mut faulty = guest(f, &f.faulty, config, events);
    tune(&mut faulty);
    let mut errors = Vec::new();
    let mut traps = Vec::new();
    for (i, o) in events.iter().enumerate() {
        let ev = event(EventKind::Added, o, false);
        healthy.on_event(&ev).expect("healthy guest");
        match faulty.try_on_event(&ev) {
            Ok(Ok(())) => {}
            Ok(Err(msg)) => errors.push(msg),
            Err(e) => {
                traps.push(trap_of(&e).unwrap_or_else(|| panic!("event {i}: not a trap: {e:?}")));
                // The trapped instance is poisoned ...
                let again = faulty
                    .try_on_event(&ev)
                    .expect_err("a trapped instance must not be re-entered");
                assert!(
                    format!("{again:?}").contains("cannot enter component instance"),
                    "{again:?}"
                );
                // ... so it is replaced by a fresh one, which resumes with the next event.
                faulty = guest(f, &f.faulty, config, events);
                tune(&mut faulty);
            }
        }
    }
    let handled: Vec<String> = healthy.messages();
    assert_eq!(
        handled.len(),
        events.len(),
        "healthy guest handled every event"
    );
    for (i, (m, o)) in handled.iter().zip(events).enumerate() {
        assert_eq!(m, &format!("handled key={} n={}", o.key, i + 1));
    }
    (errors, traps)
}

#[test]
fn js_throw_is_a_handler_error_and_the_instance_carries_on() {
    let f = fixture("js-faulty");
    let events = pods(6);
    let (errors, traps) = run_beside_healthy(&f, r#"{"mode":"throw","every":2}"#, &events, |_| {});
    assert_eq!(traps, vec![]);
    assert_eq!(
        errors,
        vec![
            "boom key=ns/p1 n=2",
            "boom key=ns/p3 n=4",
            "boom key=ns/p5 n=6"
        ]
    );
}

#[test]
fn js_infinite_loop_runs_out_of_fuel_and_a_fresh_instance_recovers() {
    let f = fixture("js-faulty");
    let events = pods(4);
    let (errors, traps) = run_beside_healthy(&f, r#"{"mode":"spin","every":2}"#, &events, |g| {
        g.fuel_per_call = 50_000_000;
    });
    assert_eq!(errors, Vec::<String>::new());
    // Every instance spins on its own 2nd event: events 2 and 4 (counted per instance:
    // the replacement after event 2 sees events 3 (n=1) and 4 (n=2)).
    assert_eq!(traps, vec![Trap::OutOfFuel, Trap::OutOfFuel]);
}

#[test]
fn js_infinite_loop_hits_the_epoch_deadline() {
    let f = fixture("js-faulty");
    let events = pods(2);
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (engine, stop) = (f.engine.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                engine.increment_epoch();
            }
        })
    };
    let (errors, traps) = run_beside_healthy(&f, r#"{"mode":"spin","every":2}"#, &events, |g| {
        g.fuel_per_call = u64::MAX / 4; // fuel never runs out: only the deadline stops it
        g.epoch_ticks_per_call = 20;
    });
    stop.store(true, Ordering::Relaxed);
    ticker.join().unwrap();
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(traps, vec![Trap::Interrupt]);
}

#[test]
fn python_throw_is_a_handler_error_and_crash_is_a_trap() {
    let f = fixture("py-faulty");
    let events = pods(4);
    let (errors, traps) = run_beside_healthy(&f, r#"{"mode":"throw","every":2}"#, &events, |_| {});
    assert_eq!(traps, vec![]);
    assert_eq!(errors, vec!["boom key=ns/p1 n=2", "boom key=ns/p3 n=4"]);

    let (errors, traps) = run_beside_healthy(&f, r#"{"mode":"crash","every":2}"#, &events, |_| {});
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(traps.len(), 2, "{traps:?}");
    assert!(
        traps.iter().all(|t| *t == Trap::UnreachableCodeReached),
        "an uncaught Python exception aborts the guest: {traps:?}"
    );
}

#[test]
fn python_infinite_loop_runs_out_of_fuel_and_a_fresh_instance_recovers() {
    let f = fixture("py-faulty");
    let events = pods(4);
    let (errors, traps) = run_beside_healthy(&f, r#"{"mode":"spin","every":2}"#, &events, |g| {
        g.fuel_per_call = 50_000_000;
    });
    assert_eq!(errors, Vec::<String>::new());
    assert_eq!(traps, vec![Trap::OutOfFuel, Trap::OutOfFuel]);
}
