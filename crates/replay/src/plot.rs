// SPDX-License-Identifier: MIT
//! `--plot FILE.svg`: pool size, stored pages and written-back pages over time, one panel
//! each (their scales differ), drawn as plain SVG.

use std::fmt::Write as _;

use crate::report::Sample;

const W: f64 = 720.0;
const PANEL_H: f64 = 150.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const GAP: f64 = 40.0;

/// The SVG document for `samples` of a run titled `title`.
pub fn svg(title: &str, samples: &[Sample]) -> String {
    type Series = (&'static str, &'static str, fn(&Sample) -> f64);
    let series: [Series; 3] = [
        ("pool_total_size (MiB)", "#1f77b4", |s| {
            s.pool_total_size as f64 / (1 << 20) as f64
        }),
        ("stored_pages", "#2ca02c", |s| s.stored_pages as f64),
        ("written_back_pages", "#d62728", |s| {
            s.written_back_pages as f64
        }),
    ];
    let h = TOP + series.len() as f64 * (PANEL_H + GAP) + 10.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="20" font-size="14" text-anchor="middle">{}</text>"#,
        W / 2.0,
        esc(title)
    );
    let t_max = samples.last().map_or(1.0, |s| s.t_s).max(1e-9);
    let pw = W - LEFT - RIGHT;
    for (i, (name, color, get)) in series.iter().enumerate() {
        let y0 = TOP + i as f64 * (PANEL_H + GAP);
        let v_max = samples.iter().map(get).fold(0.0f64, f64::max).max(1e-9);
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{y0}" width="{pw}" height="{PANEL_H}" fill="none" stroke="#888"/>"##
        );
        let _ = writeln!(
            o,
            r#"<text x="{LEFT}" y="{}" fill="{color}">{}</text>"#,
            y0 - 5.0,
            esc(name)
        );
        for k in 0..=4 {
            let v = v_max * f64::from(k) / 4.0;
            let y = y0 + PANEL_H - PANEL_H * f64::from(k) / 4.0;
            let _ = writeln!(
                o,
                r##"<text x="{}" y="{}" text-anchor="end" fill="#444">{}</text><line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#eee"/>"##,
                LEFT - 5.0,
                y + 4.0,
                fmt_num(v),
                LEFT + pw
            );
        }
        let mut pts = String::new();
        for s in samples {
            let x = LEFT + pw * s.t_s / t_max;
            let y = y0 + PANEL_H - PANEL_H * get(s) / v_max;
            let _ = write!(pts, "{x:.1},{y:.1} ");
        }
        let _ = writeln!(
            o,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.5"/>"#,
            pts.trim_end()
        );
        let _ = writeln!(
            o,
            r##"<text x="{}" y="{}" text-anchor="end" fill="#444">{t_max:.2} s</text><text x="{LEFT}" y="{}" fill="#444">0 s</text>"##,
            LEFT + pw,
            y0 + PANEL_H + 14.0,
            y0 + PANEL_H + 14.0
        );
    }
    o.push_str("</svg>\n");
    o
}

fn fmt_num(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_three_series() {
        let s: Vec<Sample> = (0..10)
            .map(|i| Sample {
                events: i * 100,
                t_s: i as f64 * 0.1,
                pool_total_size: i << 20,
                stored_pages: i * 10,
                written_back_pages: i,
                zswpout: 0,
                zswpin: 0,
                pswpout: 0,
                pswpin: 0,
                resident_pages: 0,
            })
            .collect();
        let out = svg("t <1>", &s);
        assert!(out.starts_with("<svg"));
        assert_eq!(out.matches("<polyline").count(), 3);
        assert!(out.contains("t &lt;1&gt;"));
    }
}
