//! Small exact integer helpers: floor/ceil division on signed and unsigned wide integers.

/// floor(a / b) for b > 0.
#[inline]
pub fn floor_div(a: i128, b: i128) -> i128 {
    debug_assert!(b > 0);
    a.div_euclid(b)
}

/// ceil(a / b) for b > 0.
#[inline]
pub fn ceil_div(a: i128, b: i128) -> i128 {
    debug_assert!(b > 0);
    -((-a).div_euclid(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_directions() {
        assert_eq!(floor_div(-1, 3), -1);
        assert_eq!(floor_div(7, 3), 2);
        assert_eq!(ceil_div(7, 3), 3);
        assert_eq!(ceil_div(-7, 3), -2);
        assert_eq!(ceil_div(6, 3), 2);
    }
}
