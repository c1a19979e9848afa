//! Unit tests of the fault table: JSON forms, counting, precedence and holds.
#![allow(clippy::unwrap_used, clippy::expect_used)] // failed unwraps are failed tests

use super::*;

#[test]
fn admin_json_parses_into_specs() {
    let s: FaultSpec = serde_json::from_str(
        r#"{"kind":"status","code":503,"retryAfterSeconds":2,"verbs":["patch"],"resources":["backups"],"count":3}"#,
    )
    .unwrap();
    let FaultSpec::Status(f) = s else {
        panic!("not status")
    };
    assert_eq!(f.code, 503);
    assert_eq!(f.retry_after_seconds, Some(2));
    assert_eq!(f.matcher.verbs, vec!["patch"]);
    assert_eq!(f.count, Some(3));
    let r: FaultSpec = serde_json::from_str(r#"{"kind":"refuse","seconds":1.5}"#).unwrap();
    assert_eq!(r, FaultSpec::Refuse { seconds: Some(1.5) });
    let c: FaultSpec = serde_json::from_str(r#"{"kind":"cut-watches"}"#).unwrap();
    assert_eq!(c, FaultSpec::CutWatches);
}

#[tokio::test]
async fn counted_fault_answers_n_requests() {
    let f = Faults::new();
    f.status(StatusFault::new(503).verbs(&["get"]).count(2));
    let key = RequestKey {
        verb: "get",
        resource: "pods",
        name: "",
        subresource: "",
        namespace: "",
    };
    let other = RequestKey {
        verb: "list",
        ..key
    };
    assert!(f.decide(&other).error.is_none());
    assert!(f.decide(&key).error.is_some());
    assert!(f.decide(&key).error.is_some());
    assert!(f.decide(&key).error.is_none());
}

fn key<'a>(verb: &'a str, name: &'a str) -> RequestKey<'a> {
    RequestKey {
        verb,
        resource: "configmaps",
        name,
        subresource: "",
        namespace: "default",
    }
}

#[test]
fn admin_json_parses_the_interrupting_kinds() {
    let h: FaultSpec =
        serde_json::from_str(r#"{"kind":"hang","verbs":["patch"],"holdSeconds":2,"count":1}"#)
            .unwrap();
    let FaultSpec::Hang(h) = h else {
        panic!("not hang")
    };
    assert_eq!(h.matcher.verbs, vec!["patch"]);
    assert_eq!(h.hold_seconds, Some(2.0));
    let d: FaultSpec = serde_json::from_str(
        r#"{"kind":"drop-response","resources":["configmaps"],"name":"a","hold":true}"#,
    )
    .unwrap();
    assert_eq!(
        d,
        FaultSpec::DropResponse(
            DropResponseFault::new()
                .resources(&["configmaps"])
                .name("a")
                .hold()
        )
    );
    let e: FaultSpec = serde_json::from_str(
        r#"{"kind":"delay-established","delaySeconds":1.5,"name":"widgets.example.com","delayNames":true}"#,
    )
    .unwrap();
    assert_eq!(
        e,
        FaultSpec::DelayEstablished(
            EstablishDelayFault::new(Duration::from_millis(1500))
                .name("widgets.example.com")
                .delay_names()
        )
    );
    // Round trip: what GET /faults shows can be posted again.
    let again: FaultSpec = serde_json::from_value(serde_json::to_value(&e).unwrap()).unwrap();
    assert_eq!(again, e);
}

#[tokio::test]
async fn the_first_answer_changing_fault_wins_and_only_it_is_used() {
    let f = Faults::new();
    f.hang(HangFault::new().verbs(&["patch"]).count(1));
    f.status(StatusFault::new(503).verbs(&["patch"]).count(1));
    let first = f.decide(&key("patch", "a"));
    assert!(matches!(first.interrupt, Some(Interrupt::Hang(_))));
    assert!(first.error.is_none());
    let second = f.decide(&key("patch", "a"));
    assert!(second.interrupt.is_none());
    assert_eq!(second.error.map(|e| e.code), Some(503));
    assert!(f.decide(&key("patch", "a")).error.is_none());
}

#[tokio::test]
async fn drop_response_holds_only_when_asked() {
    let f = Faults::new();
    f.drop_response(DropResponseFault::new().name("a").count(1));
    f.drop_response(DropResponseFault::new().name("b").hold().count(1));
    assert!(matches!(
        f.decide(&key("get", "a")).interrupt,
        Some(Interrupt::DropResponse(None))
    ));
    assert!(matches!(
        f.decide(&key("get", "b")).interrupt,
        Some(Interrupt::DropResponse(Some(_)))
    ));
    assert!(f.decide(&key("get", "c")).interrupt.is_none());
}

#[tokio::test]
async fn holds_end_on_time_on_removal_and_on_clear() {
    let f = Faults::new();
    let timed = f.hang(
        HangFault::new()
            .name("t")
            .hold_for(Duration::from_millis(50)),
    );
    let Some(Interrupt::Hang(h)) = f.decide(&key("get", "t")).interrupt else {
        panic!("hung")
    };
    tokio::time::timeout(Duration::from_secs(2), h.wait())
        .await
        .expect("a timed hold ends by itself");
    assert!(f.remove(timed));

    let id = f.hang(HangFault::new().name("r"));
    let Some(Interrupt::Hang(h)) = f.decide(&key("get", "r")).interrupt else {
        panic!("hung")
    };
    let waiting = tokio::spawn(h.wait());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "held until the fault is removed");
    assert!(f.remove(id));
    tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("removal lets go")
        .unwrap();

    // A used-up counted fault is gone from the table; clearing still lets its request go.
    f.hang(HangFault::new().name("c").count(1));
    let Some(Interrupt::Hang(h)) = f.decide(&key("get", "c")).interrupt else {
        panic!("hung")
    };
    assert!(f.list().is_empty());
    let waiting = tokio::spawn(h.wait());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());
    f.clear();
    tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("clear lets go")
        .unwrap();
}

#[tokio::test]
async fn establish_delay_matches_crd_names_and_counts() {
    let f = Faults::new();
    f.delay_established(
        EstablishDelayFault::new(Duration::from_secs(3))
            .name("widgets.example.com")
            .count(1),
    );
    assert!(f.establish_delay("gadgets.example.com").is_none());
    assert!(
        f.decide(&key("create", "widgets.example.com"))
            .interrupt
            .is_none()
    );
    let d = f.establish_delay("widgets.example.com").expect("delayed");
    assert_eq!(d.delay(), Duration::from_secs(3));
    assert!(f.establish_delay("widgets.example.com").is_none());
}
