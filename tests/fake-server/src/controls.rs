//! Test controls that act on calls: faults (before a call takes effect, after it, or on an open
//! stream), latency, methods an older server lacks; and the counters tests read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tonic::Code;

use crate::method::Method;

/// The codes a fault can answer with: the transient ones the reconciler retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FaultCode {
    Unavailable,
    Aborted,
    Internal,
    Unknown,
    ResourceExhausted,
}

impl FaultCode {
    pub fn code(self) -> Code {
        match self {
            FaultCode::Unavailable => Code::Unavailable,
            FaultCode::Aborted => Code::Aborted,
            FaultCode::Internal => Code::Internal,
            FaultCode::Unknown => Code::Unknown,
            FaultCode::ResourceExhausted => Code::ResourceExhausted,
        }
    }
}

/// A fault answered instead of a call: before the call takes effect, after it (`lose_answer`),
/// or on an open WatchChanges stream (`mid_stream`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub code: FaultCode,
    /// How many calls fail; every call while set when `None`.
    #[serde(default)]
    pub count: Option<u32>,
    /// The chance each call fails (0.0 to 1.0); every call when `None`.
    #[serde(default)]
    pub probability: Option<f64>,
    /// The status message; a default names the fault.
    #[serde(default)]
    pub message: Option<String>,
    /// The call takes effect first and then this fault answers instead of its result: a write
    /// the server committed whose answer was lost on the way back.
    #[serde(default)]
    pub lose_answer: bool,
    /// With `lose_answer`: how long the server holds the answer before it fails, in
    /// milliseconds (a server that hangs after committing; the caller may give up first).
    #[serde(default)]
    pub answer_delay_ms: Option<u64>,
    /// The fault ends open WatchChanges streams instead of answering calls: before each event
    /// an open stream would send, it draws (by `probability`, `count`), and a hit ends the stream
    /// with this fault's status. It never acts on the call that opens a stream. Wins over
    /// `lose_answer`.
    #[serde(default)]
    pub mid_stream: bool,
}

/// A fault that acts on a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injected {
    pub code: Code,
    pub message: String,
    /// How long to hold the answer first.
    pub delay: Option<Duration>,
}

impl Injected {
    /// What ends every open stream on [`crate::FakeServer::break_streams`]: the same status a
    /// mid-stream fault with this code ends a stream with.
    pub fn broken_stream(code: FaultCode) -> Injected {
        Injected {
            code: code.code(),
            message: Stage::MidStream.message(code, Method::WatchChanges),
            delay: None,
        }
    }
}

/// When a fault acts: before the call takes effect, after it (the answer is lost), or on an
/// open stream before it sends an event (the stream breaks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    BeforeEffect,
    AfterEffect,
    MidStream,
}

impl Stage {
    /// The default status message: names the fault and what it did.
    fn message(self, code: FaultCode, method: Method) -> String {
        match self {
            Stage::BeforeEffect => format!("injected fault {code:?} on {method}"),
            Stage::AfterEffect => format!(
                "injected fault {code:?} on {method}: the answer was lost after the call took \
                 effect"
            ),
            Stage::MidStream => {
                format!("injected fault {code:?} on {method}: the stream was broken mid-stream")
            }
        }
    }
}

impl Fault {
    /// A fault for the next `count` calls.
    pub fn times(code: FaultCode, count: u32) -> Fault {
        Fault {
            code,
            count: Some(count),
            probability: None,
            message: None,
            lose_answer: false,
            answer_delay_ms: None,
            mid_stream: false,
        }
    }

    /// The next `count` calls take effect and then answer this fault: their answers are lost.
    pub fn losing_answers(code: FaultCode, count: u32) -> Fault {
        Fault {
            lose_answer: true,
            ..Fault::times(code, count)
        }
    }

    /// The next `count` calls take effect and then hang for `delay` before answering this
    /// fault: a server that commits and then stops answering.
    pub fn hanging_after_effect(code: FaultCode, count: u32, delay: Duration) -> Fault {
        Fault {
            answer_delay_ms: Some(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)),
            ..Fault::losing_answers(code, count)
        }
    }

    /// A fault for every call, until cleared.
    pub fn always(code: FaultCode) -> Fault {
        Fault {
            code,
            count: None,
            probability: None,
            message: None,
            lose_answer: false,
            answer_delay_ms: None,
            mid_stream: false,
        }
    }

    /// Breaks open WatchChanges streams: before each event, with this chance, the stream ends
    /// with `code` instead; until cleared. Opening a stream is not affected.
    pub fn breaking_streams(code: FaultCode, probability: f64) -> Fault {
        Fault {
            mid_stream: true,
            ..Fault::with_probability(code, probability)
        }
    }

    /// The stage this fault acts at.
    pub fn stage(&self) -> Stage {
        if self.mid_stream {
            Stage::MidStream
        } else if self.lose_answer {
            Stage::AfterEffect
        } else {
            Stage::BeforeEffect
        }
    }

    /// A fault for each call with this chance, until cleared.
    pub fn with_probability(code: FaultCode, probability: f64) -> Fault {
        Fault {
            code,
            count: None,
            probability: Some(probability),
            message: None,
            lose_answer: false,
            answer_delay_ms: None,
            mid_stream: false,
        }
    }
}

/// What the server counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Calls received per method (gRPC name), including refused and faulted ones.
    pub calls: BTreeMap<String, u64>,
    /// Writes that took effect (applies, and deletes that deleted), per manager named.
    pub writes: BTreeMap<String, u64>,
    /// Refusals per stable reason.
    pub refusals: BTreeMap<String, u64>,
    /// Faults injected per method.
    pub faults: BTreeMap<String, u64>,
}

impl Counters {
    /// Calls of one method.
    pub fn calls_of(&self, method: Method) -> u64 {
        self.calls.get(method.as_str()).copied().unwrap_or(0)
    }

    /// Writes by one manager.
    pub fn writes_by(&self, manager: &str) -> u64 {
        self.writes.get(manager).copied().unwrap_or(0)
    }

    /// Writes by every manager.
    pub fn total_writes(&self) -> u64 {
        self.writes.values().sum()
    }
}

/// The controls' state.
#[derive(Debug, Default)]
pub struct Controls {
    /// Faults per method; `None` is every method.
    pub faults: BTreeMap<Option<Method>, Fault>,
    pub latency: BTreeMap<Option<Method>, Duration>,
    pub unimplemented: BTreeSet<Method>,
    pub counters: Counters,
}

impl Controls {
    /// The latency to add to a call.
    pub fn latency_of(&self, method: Method) -> Option<Duration> {
        self.latency
            .get(&Some(method))
            .or_else(|| self.latency.get(&None))
            .copied()
    }

    /// Takes a fault for a call at this stage, if one applies; counts down counted faults.
    /// `draw` is a random number in [0, 1) for probabilistic ones.
    pub fn take_fault(&mut self, method: Method, draw: f64, stage: Stage) -> Option<Injected> {
        // The method's own fault for this stage, else the default one: a method's mid-stream
        // fault leaves its opening calls to the fault set for every method.
        let key = [Some(method), None]
            .into_iter()
            .find(|key| self.faults.get(key).is_some_and(|f| f.stage() == stage))?;
        let fault = self.faults.get_mut(&key)?;
        if let Some(probability) = fault.probability
            && draw >= probability
        {
            return None;
        }
        let answer = Injected {
            code: fault.code.code(),
            message: fault
                .message
                .clone()
                .unwrap_or_else(|| stage.message(fault.code, method)),
            delay: fault.answer_delay_ms.map(Duration::from_millis),
        };
        if let Some(count) = fault.count.as_mut() {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.faults.remove(&key);
            }
        }
        self.count_fault(method);
        Some(answer)
    }

    /// Counts a fault that acted on a call or a stream of `method`.
    pub fn count_fault(&mut self, method: Method) {
        *self
            .counters
            .faults
            .entry(method.as_str().to_owned())
            .or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_fault_of_another_stage_leaves_the_default_fault_acting() {
        let mut controls = Controls::default();
        controls
            .faults
            .insert(None, Fault::always(FaultCode::Unavailable));
        controls.faults.insert(
            Some(Method::WatchChanges),
            Fault::breaking_streams(FaultCode::Aborted, 1.0),
        );
        let opening = controls.take_fault(Method::WatchChanges, 0.0, Stage::BeforeEffect);
        assert_eq!(opening.map(|f| f.code), Some(Code::Unavailable));
        let streaming = controls.take_fault(Method::WatchChanges, 0.0, Stage::MidStream);
        assert_eq!(streaming.map(|f| f.code), Some(Code::Aborted));
    }

    #[test]
    fn a_counted_fault_answers_that_many_calls() {
        let mut controls = Controls::default();
        controls.faults.insert(
            Some(Method::ApplyClient),
            Fault::times(FaultCode::Aborted, 2),
        );
        assert_eq!(
            controls
                .take_fault(Method::ApplyClient, 0.0, Stage::BeforeEffect)
                .map(|f| f.code),
            Some(Code::Aborted)
        );
        assert!(
            controls
                .take_fault(Method::GetClient, 0.0, Stage::BeforeEffect)
                .is_none()
        );
        assert!(
            controls
                .take_fault(Method::ApplyClient, 0.0, Stage::BeforeEffect)
                .is_some()
        );
        assert!(
            controls
                .take_fault(Method::ApplyClient, 0.0, Stage::BeforeEffect)
                .is_none()
        );
        assert_eq!(controls.counters.faults.get("ApplyClient"), Some(&2));
    }

    #[test]
    fn a_lost_answer_acts_only_after_the_call_took_effect() {
        let mut controls = Controls::default();
        controls.faults.insert(
            Some(Method::ApplyClient),
            Fault::losing_answers(FaultCode::Unavailable, 1),
        );
        assert!(
            controls
                .take_fault(Method::ApplyClient, 0.0, Stage::BeforeEffect)
                .is_none()
        );
        let injected = controls
            .take_fault(Method::ApplyClient, 0.0, Stage::AfterEffect)
            .unwrap();
        assert_eq!(injected.code, Code::Unavailable);
        assert!(
            injected.message.contains("answer was lost"),
            "{}",
            injected.message
        );
        assert!(
            controls
                .take_fault(Method::ApplyClient, 0.0, Stage::AfterEffect)
                .is_none()
        );
    }

    #[test]
    fn a_probable_fault_depends_on_the_draw() {
        let mut controls = Controls::default();
        controls.faults.insert(
            None,
            Fault::with_probability(FaultCode::ResourceExhausted, 0.25),
        );
        assert!(
            controls
                .take_fault(Method::GetClient, 0.1, Stage::BeforeEffect)
                .is_some()
        );
        assert!(
            controls
                .take_fault(Method::GetClient, 0.5, Stage::BeforeEffect)
                .is_none()
        );
    }

    #[test]
    fn a_mid_stream_fault_acts_only_on_open_streams() {
        let mut controls = Controls::default();
        controls.faults.insert(
            Some(Method::WatchChanges),
            Fault::breaking_streams(FaultCode::Unavailable, 1.0),
        );
        for stage in [Stage::BeforeEffect, Stage::AfterEffect] {
            assert!(
                controls
                    .take_fault(Method::WatchChanges, 0.0, stage)
                    .is_none()
            );
        }
        let injected = controls
            .take_fault(Method::WatchChanges, 0.5, Stage::MidStream)
            .unwrap();
        assert_eq!(injected.code, Code::Unavailable);
        assert!(
            injected.message.contains("broken mid-stream"),
            "{}",
            injected.message
        );
        assert_eq!(controls.counters.faults.get("WatchChanges"), Some(&1));
        // Ordinary faults leave open streams alone.
        controls
            .faults
            .insert(None, Fault::always(FaultCode::Aborted));
        assert!(
            controls
                .take_fault(Method::GetClient, 0.0, Stage::MidStream)
                .is_none()
        );
    }

    #[test]
    fn a_method_latency_overrides_the_default() {
        let mut controls = Controls::default();
        controls.latency.insert(None, Duration::from_millis(5));
        controls
            .latency
            .insert(Some(Method::GetClient), Duration::from_millis(50));
        assert_eq!(
            controls.latency_of(Method::GetClient),
            Some(Duration::from_millis(50))
        );
        assert_eq!(
            controls.latency_of(Method::ApplyClient),
            Some(Duration::from_millis(5))
        );
    }
}
