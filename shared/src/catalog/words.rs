//! Declarations of the catalog's closed vocabularies. Each word is written once, with its wire
//! string; the enum, `ALL` (in declaration order), `as_str` and `Display` follow from it, so a
//! new word cannot be left out of a list or spelled two ways.

/// A closed vocabulary: `enum Name { /// doc  Word = "wire", ... }`. The caller gives the
/// derives; the macro adds `ALL`, `as_str` and `Display`.
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$word_meta:meta])* $word:ident = $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$word_meta])* $word, )+
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: [$name; [$($wire),+].len()] = [$($name::$word),+];

            /// The word as conditions, events, metrics and documents write it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$word => $wire, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// The reasons and the events, from one table. Each reason row gives the reason, the type of
/// the event recorded on the transition into it (an event of the same name), its catalog entry
/// and when that event is recorded; each event-only row gives the event, its type and when it
/// is recorded. So a new reason is one row here plus its catalog entry and the decision that
/// raises it, and no reason can lack its event.
macro_rules! reasons_and_events {
    (
        reasons {
            $( $(#[$reason_doc:meta])* $reason:ident: $reason_type:ident => $entry:path, $reason_when:literal; )+
        }
        events_only {
            $( $event:ident: $event_type:ident, $event_when:literal; )+
        }
    ) => {
        /// Why a resource is in the state it is in. The string form (`as_str`) is what appears
        /// in conditions and runbook file names; events and metrics use [`Reason::event`] and
        /// [`Reason::metric_label`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        pub enum Reason {
            $( $(#[$reason_doc])* $reason, )+
        }

        impl Reason {
            /// Every reason, in catalog order (the order of the runbook index).
            pub const ALL: [Reason; [$(stringify!($reason)),+].len()] = [$(Reason::$reason),+];

            /// The condition reason, CamelCase.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Reason::$reason => stringify!($reason), )+
                }
            }

            /// The catalog entry of this reason.
            pub fn entry(self) -> &'static ReasonEntry {
                match self {
                    $( Reason::$reason => &$entry, )+
                }
            }

            /// The event recorded on the transition into this reason: the event of its name.
            pub const fn event(self) -> EventReason {
                match self {
                    $( Reason::$reason => EventReason::$reason, )+
                }
            }
        }

        /// The `reason` of a Kubernetes event the reconciler records: one for the transition
        /// into each [`Reason`], of the same name, and the events that follow no reason. A
        /// closed set, so no event reason is made up at the call site.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        pub enum EventReason {
            $( #[doc = $event_when] $event, )+
            $( #[doc = $reason_when] $reason, )+
        }

        impl EventReason {
            /// Every event reason: the events-only first, then one per reason in catalog order.
            pub const ALL: [EventReason; [$(stringify!($event)),+ , $(stringify!($reason)),+].len()] =
                [$(EventReason::$event),+ , $(EventReason::$reason),+];

            /// The event's `reason`, CamelCase.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( EventReason::$event => stringify!($event), )+
                    $( EventReason::$reason => stringify!($reason), )+
                }
            }

            /// Warning for what needs a person's attention, Normal for the expected course.
            pub const fn event_type(self) -> EventType {
                match self {
                    $( EventReason::$event => EventType::$event_type, )+
                    $( EventReason::$reason => EventType::$reason_type, )+
                }
            }

            /// When the event is recorded, as the runbook index says it.
            pub const fn recorded_when(self) -> &'static str {
                match self {
                    $( EventReason::$event => $event_when, )+
                    $( EventReason::$reason => $reason_when, )+
                }
            }
        }

        impl ::std::fmt::Display for Reason {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::fmt::Display for EventReason {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use {reasons_and_events, words};
