//! How commands run together: the keyspace gate (`gate`), transactions (`multi`),
//! blocked clients and their wake-ups (`blocking`), and the scripting glue: EVAL and
//! SCRIPT (`eval`), FUNCTION and FCALL (`fcall`).

pub mod blocking;
pub mod eval;
pub mod fcall;
pub mod gate;
pub mod multi;
