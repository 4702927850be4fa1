//! Text helpers that avoid `core::fmt`, which would add several kilobytes
//! to every plugin.

use alloc::string::String;

use crate::{Error, error_kind};

/// `v` in decimal.
pub fn decimal(mut v: u64) -> String {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    digits[i..].iter().map(|&d| d as char).collect()
}

/// The registry name of an error's kind (`unknown` for a kind this SDK
/// does not know).
pub fn error_kind(e: &Error) -> &'static str {
    match e.kind {
        error_kind::DENIED => "denied",
        error_kind::UNSUPPORTED => "unsupported",
        error_kind::INVALID_ARGUMENT => "invalid-argument",
        error_kind::BUFFER_TOO_SHORT => "buffer-too-short",
        error_kind::NOT_FOUND => "not-found",
        error_kind::FAILED => "failed",
        error_kind::PLUGIN => "plugin",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_renders_digits() {
        assert_eq!(super::decimal(0), "0");
        assert_eq!(
            super::decimal(18_446_744_073_709_551_615),
            "18446744073709551615"
        );
    }
}
