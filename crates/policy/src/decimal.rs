//! Decimal digits without allocation: what a child writes between fork and exec (a
//! descriptor number into mount options, its own pid to a watchdog), where only
//! async-signal-safe work is allowed.

/// Writes the decimal digits of a non-negative `value` at the start of `out` and returns
/// how many; no allocation, so a child may call it between fork and exec (where only
/// async-signal-safe work is allowed), as both platform runtimes do.
pub fn write_decimal(value: i32, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 10];
    let mut v = value.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 || len == digits.len() {
            break;
        }
    }
    let len = len.min(out.len());
    for i in 0..len {
        out[i] = digits[len - 1 - i];
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_digits_without_allocation() {
        let mut out = [0u8; 12];
        let n = write_decimal(0, &mut out);
        assert_eq!(&out[..n], b"0");
        let n = write_decimal(2_147_483_647, &mut out);
        assert_eq!(&out[..n], b"2147483647");
        let n = write_decimal(13, &mut out);
        assert_eq!(&out[..n], b"13");
    }
}
