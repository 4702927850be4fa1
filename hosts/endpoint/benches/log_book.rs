//! What keeping a plugin's log record costs the endpoint: `LogBook::push`
//! runs inside the plugin's `log` call, on its CPU deadline, once per ACK
//! frame for the ACK logger.
//!
//! ```sh
//! cargo bench -p corequic-endpoint --bench log_book
//! ```

use corequic_endpoint::LogBook;
use corequic_runtime::LogRecord;
use corequic_runtime::abi::{LogLevel, PluginVal};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The records an ACK logger keeps on one connection before its log budget
/// is spent (docs/measurements.md): each book holds as many, so that the
/// time includes the book's growth as a transfer's does.
const RECORDS_PER_BOOK: u64 = 5_500;

/// A record as the ACK logger logs it.
fn ack_record(packet_number: u64) -> LogRecord {
    LogRecord {
        plugin: "ack-logger".into(),
        level: LogLevel::Info,
        message: "ack processed".into(),
        fields: vec![
            (
                "largest-acknowledged".into(),
                PluginVal::U64(packet_number * 25),
            ),
            ("ack-delay".into(), PluginVal::Duration(25_000)),
            ("ranges".into(), PluginVal::U64(1)),
            ("packet-number".into(), PluginVal::U64(packet_number)),
        ],
    }
}

fn log_book(c: &mut Criterion) {
    let record = ack_record(1_000);
    c.bench_function("log book/push an ACK logger record", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let records = left.min(RECORDS_PER_BOOK);
                let book = LogBook::default();
                let start = Instant::now();
                for _ in 0..records {
                    book.push(black_box(&record));
                }
                timed += start.elapsed();
                drop(book);
                left -= records;
            }
            timed
        })
    });
}

criterion_group!(benches, log_book);
criterion_main!(benches);
