//! The process metrics Prometheus' client libraries export by convention
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...),
//! read from /proc at scrape time. Linux only: elsewhere none are exposed.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// /proc's clock ticks (USER_HZ), fixed at 100 for user space on Linux.
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What one scrape reads.
#[derive(Debug, Default, PartialEq)]
pub struct Sample {
    pub cpu_seconds: f64,
    pub resident_bytes: i64,
    pub virtual_bytes: i64,
    pub threads: i64,
    pub open_fds: i64,
    pub max_fds: i64,
    pub start_time_seconds: f64,
}

/// `kB` lines of /proc/self/status, in bytes.
fn status_kb(status: &str, key: &str) -> Option<i64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Parses /proc/self/stat, /proc/self/status, /proc/stat's `btime` and
/// /proc/self/limits.
pub fn parse(
    stat: &str,
    status: &str,
    proc_stat: &str,
    limits: &str,
    open_fds: i64,
) -> Option<Sample> {
    // The command may hold spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime 15, starttime 22.
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let btime: f64 = proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let max_fds = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some(Sample {
        cpu_seconds: (field(14)? + field(15)?) / TICKS_PER_SECOND,
        resident_bytes: status_kb(status, "VmRSS:").unwrap_or(0),
        virtual_bytes: status_kb(status, "VmSize:").unwrap_or(0),
        threads: status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
        open_fds,
        max_fds,
        start_time_seconds: btime + field(22)? / TICKS_PER_SECOND,
    })
}

fn read() -> Option<Sample> {
    let r = |p: &str| std::fs::read_to_string(p).ok();
    let fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as i64;
    parse(
        &r("/proc/self/stat")?,
        &r("/proc/self/status")?,
        &r("/proc/stat")?,
        &r("/proc/self/limits").unwrap_or_default(),
        fds,
    )
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = read() else { return Ok(()) };
        let cpu = ConstCounter::new(s.cpu_seconds);
        let help = "Total user and system CPU time spent in seconds";
        let d = encoder.encode_descriptor("process_cpu_seconds", help, None, cpu.metric_type())?;
        cpu.encode(d)?;
        // One row a gauge: name, help, value.
        #[rustfmt::skip]
        let gauges: [(&str, &str, i64); 5] = [
            ("process_resident_memory_bytes", "Resident memory size in bytes", s.resident_bytes),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes", s.virtual_bytes),
            ("process_open_fds", "Number of open file descriptors", s.open_fds),
            ("process_max_fds", "Maximum number of open file descriptors", s.max_fds),
            ("process_threads", "Number of OS threads in the process", s.threads),
        ];
        for (name, help, v) in gauges {
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        let start = ConstGauge::new(s.start_time_seconds);
        let help = "Start time of the process since unix epoch in seconds";
        let name = "process_start_time_seconds";
        start.encode(encoder.encode_descriptor(name, help, None, start.metric_type())?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_as_upstream_client_libraries_read_them() {
        let stat = "4242 (gpu claims (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 1200 123456789 5000 18446744073709551615";
        let status = "Name:\tgpu-claims\nVmSize:\t  123456 kB\nVmRSS:\t   20480 kB\nThreads:\t9\n";
        let proc_stat = "cpu  1 2 3\nbtime 1764460800\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n";
        let s = parse(stat, status, proc_stat, limits, 17).unwrap();
        assert_eq!(
            s,
            Sample {
                cpu_seconds: 3.0,
                resident_bytes: 20480 * 1024,
                virtual_bytes: 123456 * 1024,
                threads: 9,
                open_fds: 17,
                max_fds: 1048576,
                start_time_seconds: 1764460800.0 + 12.0,
            }
        );
    }

    #[test]
    fn this_process_is_read() {
        if cfg!(target_os = "linux") {
            let s = read().expect("/proc is readable");
            assert!(
                s.resident_bytes > 0 && s.open_fds > 0 && s.threads > 0,
                "{s:?}"
            );
        }
    }
}
