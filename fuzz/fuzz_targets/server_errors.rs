//! A call the server refused: a gRPC status with its `google.rpc.Status` details (ErrorInfo with
//! the reason and metadata, BadRequest with field violations), decoded by the client into the
//! error the reconciler classifies. The first two bytes are the code, then the message and the
//! details' bytes, cut at the first NUL.
//!
//! Properties: nothing panics; the error shows (`Display`) and maps onto a cause; a reason it
//! reports is one the catalog knows by that name.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nauthera_client::{CallError, ServerError, causes};
use nauthera_shared::catalog::ServerReason;
use tonic::{Code, Status};

fuzz_target!(|data: &[u8]| {
    let Some((code, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let code = Code::from(i32::from(i16::from_le_bytes(*code)));
    let (message, details) = match rest.iter().position(|byte| *byte == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let message = String::from_utf8_lossy(message);
    let status = Status::with_details(code, message.as_ref(), details.to_vec().into());

    let error = ServerError::from_status(&status);
    assert_eq!(error.code, code);
    let _ = error.to_string();
    let _ = error.code_name();
    let _ = (error.is_retryable(), error.is_unimplemented());
    if let Some(reason) = error.reason {
        assert_eq!(ServerReason::parse(reason.as_str()), Some(reason));
    }
    let _ = causes::cause_of_error(error.reason, error.code);

    let call = CallError::from_status(status, "nauthera-server:8443");
    let _ = (call.to_string(), call.is_retryable(), call.reason());
});
