// SPDX-License-Identifier: MIT
//! The PSI pressure source: a background thread that arms a Linux PSI trigger
//! (`/proc/pressure/memory` or a cgroup's `memory.pressure`), polls it for `POLLPRI`, and runs
//! the memory-pressure shrinker on each event.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use crate::cache::Inner;
use crate::Error;

/// Where and how to listen for memory pressure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PressureConfig {
    /// `/proc/pressure/memory` or a cgroup's `memory.pressure`.
    pub path: PathBuf,
    /// PSI trigger: `"some|full STALL_US WINDOW_US"`, e.g. `"some 150000 2000000"` (150 ms of
    /// stall within 2 s). Without CAP_SYS_RESOURCE the kernel only accepts windows that are a
    /// multiple of 2 s (so the kernel-docs example `"some 150000 1000000"` needs privilege).
    pub trigger: String,
    /// Shift applied to each freeable count per event (the reclaim priority).
    pub priority: u32,
}

impl Default for PressureConfig {
    fn default() -> Self {
        PressureConfig {
            path: PathBuf::from("/proc/pressure/memory"),
            trigger: "some 150000 2000000".into(),
            priority: 2,
        }
    }
}

impl PressureConfig {
    fn validate(&self) -> Result<(), Error> {
        let mut it = self.trigger.split_whitespace();
        let kind = it.next();
        let stall = it.next().and_then(|v| v.parse::<u64>().ok());
        let window = it.next().and_then(|v| v.parse::<u64>().ok());
        match (kind, stall, window, it.next()) {
            (Some("some" | "full"), Some(s), Some(w), None) if s > 0 && s <= w => Ok(()),
            _ => Err(Error::PressureTrigger {
                trigger: self.trigger.clone(),
            }),
        }
    }
}

pub(crate) struct Monitor {
    stop: Arc<AtomicBool>,
    events: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<()>,
}

impl Monitor {
    pub(crate) fn start(inner: Weak<Inner>, cfg: PressureConfig) -> Result<Monitor, Error> {
        cfg.validate()?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&cfg.path)
            .map_err(|source| Error::PressureOpen {
                path: cfg.path.clone(),
                source,
            })?;
        // The trigger string must be written in one write, NUL included, as PSI expects.
        let mut msg = cfg.trigger.clone().into_bytes();
        msg.push(0);
        file.write_all(&msg).map_err(|source| Error::PressureArm {
            path: cfg.path.clone(),
            trigger: cfg.trigger.clone(),
            source,
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(AtomicU64::new(0));
        let (s, ev) = (stop.clone(), events.clone());
        let handle = std::thread::Builder::new()
            .name("zswap-psi".into())
            .spawn(move || {
                let fd = file.as_raw_fd();
                while !s.load(Relaxed) {
                    let mut pfd = libc::pollfd {
                        fd,
                        events: libc::POLLPRI,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd on the stack, a descriptor `file` keeps open.
                    let n = unsafe { libc::poll(&mut pfd, 1, 100) };
                    if n < 0 {
                        if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                        {
                            continue;
                        }
                        return;
                    }
                    if pfd.revents & libc::POLLERR != 0 {
                        return; // the monitored cgroup went away
                    }
                    if pfd.revents & libc::POLLPRI != 0 {
                        ev.fetch_add(1, Relaxed);
                        let Some(inner) = inner.upgrade() else { return };
                        inner.shrink_all(cfg.priority);
                    }
                }
                drop(file);
            })
            .map_err(Error::PressureSpawn)?;
        Ok(Monitor {
            stop,
            events,
            handle,
        })
    }

    /// Stop the thread; the number of pressure events it handled.
    pub(crate) fn stop(self) -> u64 {
        self.stop.store(true, Relaxed);
        let _ = self.handle.join();
        self.events.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::time::Duration;

    use crate::testutil::cache;
    use crate::{Error, PressureConfig};

    #[test]
    #[cfg_attr(miri, ignore = "PSI files and poll(2) are not available under Miri")]
    fn pressure_monitor_arms_a_psi_trigger() {
        let z = cache();
        let bad = PressureConfig {
            trigger: "most 1 2".into(),
            ..PressureConfig::default()
        };
        assert!(matches!(
            z.start_pressure_monitor(bad),
            Err(Error::PressureTrigger { .. })
        ));
        if !std::path::Path::new("/proc/pressure/memory").exists() {
            writeln!(
                std::io::stderr(),
                "SKIPPED: no /proc/pressure/memory (kernel without PSI)"
            )
            .ok();
            return;
        }
        match z.start_pressure_monitor(PressureConfig::default()) {
            Ok(()) => {
                std::thread::sleep(Duration::from_millis(150));
                let _events = z.stop_pressure_monitor();
            }
            Err(e) => {
                writeln!(
                    std::io::stderr(),
                    "SKIPPED: cannot arm a PSI trigger here: {e}"
                )
                .ok();
            }
        }
        // A window the kernel refuses is reported with the reason.
        let odd = PressureConfig {
            trigger: "some 150000 1000001".into(),
            ..PressureConfig::default()
        };
        if let Err(e) = z.start_pressure_monitor(odd) {
            assert!(e.to_string().contains("window"), "{e}");
        }
    }
}
