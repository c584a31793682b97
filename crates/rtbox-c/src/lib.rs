//! C ABI of the periodic-task API (`include/rtbox.h`): a thin layer over `rtbox-task`. Each
//! thread has its own task (thread-local state); every call returns an `rt_error` code and
//! never aborts (a panic inside is caught and reported as `RT_EINTERNAL`). The detailed
//! message of the calling thread's last error is `rt_last_error()`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use rtbox_task::{PeriodicTask, TaskError};

pub const RT_OK: c_int = 0;
pub const RT_ESTATE: c_int = 1;
pub const RT_EINVAL: c_int = 2;
pub const RT_ENODAEMON: c_int = 3;
pub const RT_EREFUSED: c_int = 4;
pub const RT_ESYS: c_int = 5;
pub const RT_EINTERNAL: c_int = 6;

thread_local! {
    static TASK: RefCell<Option<PeriodicTask>> = const { RefCell::new(None) };
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn code(e: &TaskError) -> c_int {
    match e {
        TaskError::State { .. } => RT_ESTATE,
        TaskError::Invalid { .. } => RT_EINVAL,
        TaskError::NoDaemon(_) => RT_ENODAEMON,
        TaskError::Refused(_) => RT_EREFUSED,
        TaskError::System(_) => RT_ESYS,
    }
}

fn remember(msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Runs `f` on the calling thread's task; the result as a code, the message kept.
fn with_task(f: impl FnOnce(&mut PeriodicTask) -> Result<(), TaskError>) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        TASK.with(|t| {
            let mut t = t.borrow_mut();
            f(t.get_or_insert_with(PeriodicTask::new))
        })
    }));
    match r {
        Ok(Ok(())) => {
            remember(String::new());
            RT_OK
        }
        Ok(Err(e)) => {
            remember(e.to_string());
            code(&e)
        }
        Err(_) => {
            remember("internal error in librtbox (a bug: please report it)".into());
            RT_EINTERNAL
        }
    }
}

/// A C string argument, or `RT_EINVAL` naming the field.
fn text(field: &'static str, s: *const c_char) -> Result<String, TaskError> {
    if s.is_null() {
        return Err(TaskError::Invalid {
            field,
            why: "NULL".into(),
        });
    }
    // SAFETY: the caller passes a NUL-terminated string (checked non-null above).
    let c = unsafe { CStr::from_ptr(s) };
    c.to_str()
        .map(str::to_string)
        .map_err(|_| TaskError::Invalid {
            field,
            why: "not UTF-8".into(),
        })
}

/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rt_set_box(name: *const c_char) -> c_int {
    with_task(|t| t.set_box(&text("box", name)?))
}

/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rt_set_socket(path: *const c_char) -> c_int {
    with_task(|t| t.set_socket(Path::new(&text("socket", path)?)))
}

#[no_mangle]
pub extern "C" fn rt_enter() -> c_int {
    with_task(PeriodicTask::enter)
}

#[no_mangle]
pub extern "C" fn rt_exit() -> c_int {
    with_task(PeriodicTask::exit)
}

#[no_mangle]
pub extern "C" fn rt_set_wcet(ns: u64) -> c_int {
    with_task(|t| t.set_wcet(ns))
}

#[no_mangle]
pub extern "C" fn rt_set_period(ns: u64) -> c_int {
    with_task(|t| t.set_period(ns))
}

#[no_mangle]
pub extern "C" fn rt_set_deadline(ns: u64) -> c_int {
    with_task(|t| t.set_deadline(ns))
}

#[no_mangle]
pub extern "C" fn rt_set_priority(prio: c_int) -> c_int {
    with_task(|t| {
        let p = u32::try_from(prio).map_err(|_| TaskError::Invalid {
            field: "priority",
            why: format!("{prio} is not in 1..99"),
        })?;
        t.set_priority(p)
    })
}

#[no_mangle]
pub extern "C" fn rt_run(timeout_ns: u64) -> c_int {
    with_task(|t| t.run(timeout_ns))
}

#[no_mangle]
pub extern "C" fn rt_wait_for_period() -> c_int {
    with_task(PeriodicTask::wait_for_period)
}

/// The fixed text of an error code (static storage).
#[no_mangle]
pub extern "C" fn rt_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        RT_OK => c"success",
        RT_ESTATE => c"call out of order (see rt_last_error for the call expected first)",
        RT_EINVAL => c"invalid argument",
        RT_ENODAEMON => c"cannot reach the rtbox daemon",
        RT_EREFUSED => c"refused by the rtbox daemon",
        RT_ESYS => c"system error",
        RT_EINTERNAL => c"internal error in librtbox",
        _ => c"unknown rtbox error code",
    };
    s.as_ptr()
}

/// The calling thread's last error in detail ("" after a success); valid until its next call.
#[no_mangle]
pub extern "C" fn rt_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: rt_last_error returns a valid NUL-terminated string.
        unsafe { CStr::from_ptr(rt_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn out_of_order_calls_return_codes_and_say_why() {
        assert_eq!(rt_wait_for_period(), RT_ESTATE);
        assert!(last().contains("rt_run first"), "{}", last());
        assert_eq!(rt_set_wcet(2_000_000), RT_ESTATE);
        assert_eq!(rt_set_priority(-1), RT_EINVAL);
        // SAFETY: valid and NULL strings are both allowed.
        unsafe {
            assert_eq!(rt_set_socket(c"/nonexistent/sock".as_ptr()), RT_OK);
            assert_eq!(rt_set_box(std::ptr::null()), RT_EINVAL);
            assert_eq!(rt_set_box(c"rt".as_ptr()), RT_OK);
        }
        assert_eq!(last(), "");
        assert_eq!(rt_enter(), RT_ENODAEMON);
        assert!(last().contains("cannot reach"), "{}", last());
    }

    #[test]
    fn every_code_has_a_text() {
        for c in RT_OK..=RT_EINTERNAL {
            // SAFETY: rt_strerror returns a static NUL-terminated string.
            let s = unsafe { CStr::from_ptr(rt_strerror(c)) }.to_string_lossy();
            assert!(!s.starts_with("unknown"), "{c}");
        }
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(rt_strerror(99)) }.to_string_lossy();
        assert!(s.starts_with("unknown"));
    }
}
