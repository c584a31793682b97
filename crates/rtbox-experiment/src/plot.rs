//! A hand-written SVG line plot of success ratios (no plotting dependency).

/// One line of the plot.
pub struct Series<'a> {
    pub name: &'a str,
    pub points: Vec<(f64, f64)>,
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Draws `series` with x in [x_min, x_max] (from the data) and y in [0, 1].
pub fn line_plot_svg(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    plot_svg(title, x_label, y_label, series, 1.0)
}

/// Draws `series` with x in [x_min, x_max] and y in [0, y_max] (from the data), without
/// point markers (many points, e.g. a supply bound function).
pub fn curve_plot_svg(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0_f64, f64::max);
    plot_svg(
        title,
        x_label,
        y_label,
        series,
        if y_max > 0.0 { y_max } else { 1.0 },
    )
}

/// Draws `measured` and `reference` ratios in y [0, 1]: pair k shares a colour, measured
/// solid, reference dashed (e.g. real-kernel runs against the simulator on the same sets).
pub fn paired_plot_svg(
    title: &str,
    x_label: &str,
    y_label: &str,
    measured: &[Series],
    reference: &[Series],
) -> String {
    let n = measured.len();
    let all: Vec<Series> = measured
        .iter()
        .chain(reference)
        .map(|s| Series {
            name: s.name,
            points: s.points.clone(),
        })
        .collect();
    plot_styled(title, x_label, y_label, &all, 1.0, &|k| {
        (COLORS[(k % n.max(1)) % COLORS.len()], k >= n)
    })
}

fn plot_svg(title: &str, x_label: &str, y_label: &str, series: &[Series], y1: f64) -> String {
    plot_styled(title, x_label, y_label, series, y1, &|k| {
        (COLORS[k % COLORS.len()], false)
    })
}

/// `style(k)`: series k's colour and whether it is dashed.
fn plot_styled(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    y1: f64,
    style: &dyn Fn(usize) -> (&'static str, bool),
) -> String {
    let ratio = y1 == 1.0;
    let (w, h) = (720.0, 440.0);
    let (left, right, top, bottom) = (70.0, 170.0, 40.0, 60.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1e-12 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    let sx = |x: f64| left + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| top + (1.0 - (y / y1).clamp(0.0, 1.0)) * ph;
    let mut s = String::new();
    s.push_str(&format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    ));
    s.push_str(&format!(
        "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n"
    ));
    s.push_str(&format!(
        "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        left + pw / 2.0,
        esc(title)
    ));
    // Grid and ticks: y every 0.1, x at 6 evenly spaced values.
    for i in 0..=10 {
        let y = y1 * i as f64 / 10.0;
        let label = if ratio {
            format!("{y:.1}")
        } else {
            trim_number(y)
        };
        s.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1:.1}\" y2=\"{0:.1}\" stroke=\"#ddd\"/>\n<text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\">{label}</text>\n",
            sy(y),
            left + pw,
            left - 6.0,
            sy(y) + 4.0
        ));
    }
    for i in 0..=5 {
        let x = x0 + (x1 - x0) * i as f64 / 5.0;
        s.push_str(&format!(
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"#eee\"/>\n<text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{3}</text>\n",
            sx(x),
            top + ph,
            top + ph + 18.0,
            trim_number(x)
        ));
    }
    s.push_str(&format!(
        "<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"black\"/>\n"
    ));
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        left + pw / 2.0,
        h - 18.0,
        esc(x_label)
    ));
    s.push_str(&format!(
        "<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">{1}</text>\n",
        top + ph / 2.0,
        esc(y_label)
    ));
    for (k, ser) in series.iter().enumerate() {
        let (color, dashed) = style(k);
        let dash = if dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            pts.join(" ")
        ));
        for &(x, y) in ser.points.iter().filter(|_| ratio) {
            s.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>\n",
                sx(x),
                sy(y)
            ));
        }
        let ly = top + 10.0 + 20.0 * k as f64;
        s.push_str(&format!(
            "<line x1=\"{0}\" y1=\"{ly}\" x2=\"{1}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>\n<text x=\"{2}\" y=\"{3}\">{4}</text>\n",
            left + pw + 12.0,
            left + pw + 36.0,
            left + pw + 42.0,
            ly + 4.0,
            esc(ser.name)
        ));
    }
    s.push_str("</svg>\n");
    s
}

fn trim_number(x: f64) -> String {
    let t = format!("{x:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    if t.is_empty() || t == "-0" {
        "0".into()
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_one_polyline_per_series_and_escapes_names() {
        let svg = line_plot_svg(
            "t <1>",
            "U",
            "ratio",
            &[
                Series {
                    name: "a&b",
                    points: vec![(0.5, 1.0), (1.0, 0.25)],
                },
                Series {
                    name: "c",
                    points: vec![(0.5, 0.5), (1.0, 0.0)],
                },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a&amp;b") && svg.contains("t &lt;1&gt;"));
        // y = 1.0 maps to the top of the plot area, y = 0 to the bottom.
        assert!(svg.contains("points=\"70.0,40.0 550.0,295.0\""), "{svg}");
    }
}
