//! Text helpers that avoid `core::fmt`, which would add several kilobytes
//! to every plugin.

use alloc::string::String;

use crate::Error;

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

/// The WIT name of an error's case.
pub fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::Denied(_) => "denied",
        Error::Unsupported(_) => "unsupported",
        Error::InvalidArgument(_) => "invalid-argument",
        Error::BufferTooShort(_) => "buffer-too-short",
        Error::NotFound(_) => "not-found",
        Error::Failed(_) => "failed",
        Error::Plugin(_) => "plugin",
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
