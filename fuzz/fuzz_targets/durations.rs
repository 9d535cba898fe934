//! Durations as flags and manifests write them: `shared::duration::parse` (flags such as
//! `--resync`, kubectl's form or bare seconds) and a rotation's `every` (`secret_rotation::
//! parse_every`).
//!
//! Properties: nothing panics; a duration read is written back (`duration::format`) in a form
//! that reads as the same duration, to the millisecond the form keeps.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use nauthera_shared::duration;
use nauthera_shared::resources::parse_every;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(read) = duration::parse(text) {
        let kept = Duration::from_millis(u64::try_from(read.as_millis()).unwrap_or(u64::MAX));
        let written = duration::format(kept);
        assert_eq!(
            duration::parse(&written),
            Ok(kept),
            "{text:?} read as {read:?} is written {written:?}"
        );
    }
    let _ = parse_every(text);
});
