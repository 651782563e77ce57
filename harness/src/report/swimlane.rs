//! The exit timeline as a picture: an SVG swimlane, one lane per thread of
//! each process of the run, time across. Each event is a mark in its lane
//! with its words written upright above the lanes, in the order the events
//! happened; long quiet stretches are cut short and marked with the time they
//! took, so that the exit, a few milliseconds at the end of a run, gets the
//! room it needs. A run of C++ static destructors of one library is one bar.
//!
//! The picture is plain SVG: no script, no font or file fetched; each mark has
//! a `<title>` with the whole sentence, which a browser shows on hover.

use super::markup::text;
use crate::explain::{Kind, Line, Story};
use crate::host::messages::LayerMessage;
use crate::run::hang::HangReport;
use std::fmt::Write as _;
use vkexit_evidence::files;

/// Width of the lane names.
const LEFT: usize = 230;
/// One column per event, three for a bar.
const COLUMN: usize = 17;
const BAR_COLUMNS: usize = 3;
const LANE: usize = 30;
/// Characters of an event's words written above the lanes.
const LABEL_CHARS: usize = 76;
/// Pixels per character of the 11 px labels (a generous estimate).
const CHAR_PX: usize = 6;
/// At most this many events are drawn: the last ones, where the exit is.
const MAX_EVENTS: usize = 600;

/// A mark: its colour and how it is drawn.
struct Style {
    colour: &'static str,
    legend: &'static str,
}

fn style(kind: Kind) -> Style {
    let (colour, legend) = match kind {
        Kind::Process => (
            "#212121",
            "process: start, main returns, exit, finalization",
        ),
        Kind::HandlerRegistered => ("#1565c0", "exit handler registered"),
        Kind::HandlerRan => ("#0d47a1", "exit handler runs"),
        Kind::Destructors => ("#64b5f6", "C++ static destructors of one library"),
        Kind::Library => ("#757575", "dlopen / dlclose"),
        Kind::Vulkan => (
            "#2e7d32",
            "VkInstance / VkDevice created, destroyed, left alive",
        ),
        Kind::Driver => ("#6a1b9a", "the (emulated) driver"),
        Kind::Report => ("#e65100", "a layer's report"),
        Kind::Crash => ("#c62828", "crash"),
        Kind::Hang => ("#b71c1c", "hung: still running at the timeout"),
    };
    Style { colour, legend }
}

const LEGEND: [Kind; 10] = [
    Kind::Process,
    Kind::HandlerRegistered,
    Kind::HandlerRan,
    Kind::Destructors,
    Kind::Library,
    Kind::Vulkan,
    Kind::Driver,
    Kind::Report,
    Kind::Crash,
    Kind::Hang,
];

/// One mark to draw.
struct Mark {
    t_ns: u64,
    lane: usize,
    kind: Kind,
    label: String,
    title: String,
    columns: usize,
    /// Drawn hollow and dashed: an exit handler that never ran.
    never_ran: bool,
}

/// The picture of the run in `dir`: its story, its validation layer's first messages, and
/// the threads a hang left running.
pub fn of_run(dir: &std::path::Path) -> String {
    let story = Story::read(dir);
    let messages = super::first_run::FirstRun::read(dir).messages;
    let hang = std::fs::read_to_string(dir.join(files::HANG))
        .ok()
        .and_then(|t| serde_json::from_str::<HangReport>(&t).ok());
    render(&story, &messages, hang.as_ref())
}

/// The picture of one run's story; `messages` are the validation layer's first reports,
/// whose log holds no times: each is placed just after the call it names when the trace
/// recorded that call on one of its objects, and listed under the lanes otherwise.
pub fn render(story: &Story, messages: &[LayerMessage], hang: Option<&HangReport>) -> String {
    let mut lines = story.lines();
    let left_out = lines.len().saturating_sub(MAX_EVENTS);
    lines.drain(..left_out);
    let mut lanes: Vec<(i64, String)> = Vec::new();
    let mut lane_of = |pid: i64, thread: &str| -> usize {
        let key = (pid, thread.to_string());
        match lanes.iter().position(|l| *l == key) {
            Some(i) => i,
            None => {
                lanes.push(key);
                lanes.len() - 1
            }
        }
    };
    let mut marks: Vec<Mark> = Vec::new();
    let mut untimed: Vec<&LayerMessage> = Vec::new();
    for line in &lines {
        let lane = lane_of(line.pid, &line.thread);
        marks.push(mark_of(line, lane));
    }
    for m in messages {
        match placed_after(&lines, m) {
            Some(i) => {
                let lane = marks[i].lane;
                let at = marks[i].t_ns;
                let mark = Mark {
                    t_ns: at,
                    lane,
                    kind: Kind::Report,
                    label: format!("validation: {}", m.line()),
                    title: format!(
                        "validation layer, during this call (its log has no times): {}",
                        m.line()
                    ),
                    columns: 1,
                    never_ran: false,
                };
                marks.insert(i + 1, mark);
            }
            None => untimed.push(m),
        }
    }
    if let Some((pid, thread)) = story.crash_lane() {
        let lane = lane_of(pid, &thread);
        for h in story.cut_off() {
            marks.push(Mark {
                t_ns: marks.last().map_or(0, |m| m.t_ns),
                lane,
                kind: if h.contains("static destructor") {
                    Kind::Destructors
                } else {
                    Kind::HandlerRan
                },
                label: format!("never ran: {h}"),
                title: format!("never ran, cut off by the crash: {h}"),
                columns: 1,
                never_ran: true,
            });
        }
    }
    // A hang has no time of its own: its threads were still running when the timeout came,
    // after every event recorded.
    for t in hang.map(|h| h.threads.as_slice()).unwrap_or_default() {
        let lane = lane_of(i64::from(t.pid), &t.name);
        let wchan = match t.wchan.as_str() {
            "" | "0" => String::new(),
            w => format!(" in {w}"),
        };
        let when = match hang.is_some_and(|h| h.during_exit) {
            true => ", during exit",
            false => "",
        };
        marks.push(Mark {
            t_ns: marks.last().map_or(0, |m| m.t_ns),
            lane,
            kind: Kind::Hang,
            label: format!("HUNG: state {}{wchan}{when}", t.state),
            title: format!(
                "still running at the timeout: thread {} (tid {}) of pid {}, state {}{wchan}{when}",
                t.name, t.tid, t.pid, t.state
            ),
            columns: 1,
            never_ran: false,
        });
    }
    draw(&marks, &lanes, story, &untimed, left_out)
}

fn mark_of(line: &Line, lane: usize) -> Mark {
    Mark {
        t_ns: line.t_ns,
        lane,
        kind: line.kind,
        label: label(&line.text),
        title: line.text.clone(),
        columns: if line.kind == Kind::Destructors {
            BAR_COLUMNS
        } else {
            1
        },
        never_ran: false,
    }
}

/// The index of the story line a validation message belongs after: the last line of the
/// call it names that names one of its objects (a trace line such as `vkDestroyDevice
/// VkDevice 0x…`).
fn placed_after(lines: &[Line], m: &LayerMessage) -> Option<usize> {
    let call = m.call.as_deref()?;
    let handles: Vec<&str> = m
        .objects
        .iter()
        .filter_map(|o| o.split_whitespace().last())
        .collect();
    lines.iter().rposition(|l| {
        l.text.split_whitespace().next() == Some(call) && handles.iter().any(|h| l.text.contains(h))
    })
}

/// The words above a mark: the sentence made shorter (file names for paths, no thread: the
/// lane says it, a run's handler numbers left to the title), then cut.
fn label(sentence: &str) -> String {
    let sentence = match sentence.split_once(" on thread ") {
        Some((head, tail)) => match tail.split_once(' ') {
            Some((_thread, rest)) => format!("{head} {rest}"),
            None => head.to_string(),
        },
        None => sentence.to_string(),
    };
    // A crash: the signal and where the pc was, without the addresses.
    let sentence = match sentence.strip_prefix("CRASH ") {
        Some(crash) => {
            let signal = crash.split(' ').next().unwrap_or("");
            let region = crash.split_once(" in ").map_or("", |(_, r)| r);
            let region = region.split(", address").next().unwrap_or(region);
            let when = crash
                .split_once(", during")
                .map_or(String::new(), |(_, w)| format!(", during{w}"));
            format!("CRASH {signal}, pc in {region}{when}")
        }
        None => sentence,
    };
    let sentence = match (
        sentence.strip_prefix("exit handlers #"),
        sentence.find(": "),
    ) {
        (Some(_), Some(at)) => {
            let verb = sentence[..at].rsplit(' ').next().unwrap_or("");
            format!("{verb}: {}", &sentence[at + 2..])
        }
        _ => sentence.to_string(),
    };
    let sentence: Vec<&str> = sentence
        .split(' ')
        .map(|w| match w.rsplit_once('/') {
            Some((_, name)) if w.starts_with('/') && !name.is_empty() => name,
            _ => w,
        })
        .collect();
    let short = sentence
        .join(" ")
        .replace("exit handler #", "handler #")
        .replace("exit handlers #", "handlers #")
        .replace(", registered by ", ", ")
        .replace("C++ static destructors", "static destructors")
        .replace("C++ static destructor", "static destructor")
        .replace(" (not timed)", "")
        .replace(", the validation layer", "")
        .replace(", a layer", "")
        .replace(" (.fini_array and __attribute__((destructor)) run now)", "");
    cut(&short, LABEL_CHARS)
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    s.chars().take(max - 1).collect::<String>() + "…"
}

/// Before a validation message that could not be placed in time.
const UNTIMED: &str = "validation layer (its log has no times; run with --trace to place it): ";

/// A gap between events longer than this share of the run is cut short in the picture.
const GAP_SHARE: f64 = 0.08;

fn draw(
    marks: &[Mark],
    lanes: &[(i64, String)],
    story: &Story,
    untimed: &[&LayerMessage],
    left_out: usize,
) -> String {
    let first = marks.iter().map(|m| m.t_ns).min().unwrap_or(0);
    let last = marks.iter().map(|m| m.t_ns).max().unwrap_or(0);
    let span = last.saturating_sub(first).max(1) as f64;
    let label_h = 16 + LABEL_CHARS * CHAR_PX;
    let top = 28 + label_h;
    let lanes_h = lanes.len().max(1) * LANE;
    let columns: usize = marks.iter().map(|m| m.columns).sum::<usize>() + 2;
    // Wide enough for the lanes, the legend and the notes under them.
    let note_chars = untimed
        .iter()
        .map(|m| UNTIMED.len() + cut(&m.line(), 125).chars().count())
        .max()
        .unwrap_or(0);
    let width = (LEFT + columns * COLUMN + 20)
        .max(1000)
        .max(16 + note_chars * CHAR_PX);
    let notes = untimed.len() + usize::from(left_out > 0);
    let legend_top = top + lanes_h + 56;
    let height = legend_top + 24 * LEGEND.len().div_ceil(3) + 18 * notes + 16;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"swimlane\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">"
    );
    let _ = writeln!(
        svg,
        "<title>The exit timeline: one lane per thread, time across</title>"
    );
    let _ = writeln!(
        svg,
        "<rect width=\"{width}\" height=\"{height}\" fill=\"#fff\"/>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"8\" y=\"18\" font-size=\"13\" font-weight=\"bold\">Exit timeline: one lane per thread, events in order, time below</text>"
    );

    // The exit: from main's return or exit's call to the end, shaded.
    let exit_at = story
        .lines()
        .iter()
        .find(|l| l.text.starts_with("main returned") || l.text.starts_with("exit("))
        .map(|l| l.t_ns);
    let mut x = LEFT + COLUMN;
    let mut xs = Vec::with_capacity(marks.len());
    let mut prev: Option<u64> = None;
    let mut gaps = Vec::new();
    for m in marks {
        if let Some(p) = prev {
            let gap = m.t_ns.saturating_sub(p);
            if gap as f64 > span * GAP_SHARE {
                gaps.push((x, gap));
            }
        }
        xs.push(x);
        x += m.columns * COLUMN;
        prev = Some(m.t_ns);
    }
    if let Some(at) = exit_at {
        if let Some(i) = marks.iter().position(|m| m.t_ns >= at) {
            let x0 = xs[i];
            let _ = writeln!(
                svg,
                "<rect x=\"{x0}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff8e1\"/>",
                top - 4,
                x + COLUMN - x0,
                lanes_h + 8
            );
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{}\" fill=\"#8d6e00\">exit ▸</text>",
                x0 + 2,
                top + lanes_h + 44
            );
        }
    }
    // Lanes.
    for (i, (pid, thread)) in lanes.iter().enumerate() {
        let y = top + i * LANE;
        let name = match thread.as_str() {
            "" => format!("pid {pid}"),
            t => format!("{} · pid {pid}", cut(t, 24)),
        };
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{mid}\" x2=\"{x}\" y2=\"{mid}\" stroke=\"#bdbdbd\"/><text x=\"8\" y=\"{}\" class=\"lane\">{}</text>",
            y + LANE / 2 + 4,
            text(&name),
            mid = y + LANE / 2
        );
    }
    // Quiet stretches, cut short; each says how long it was, where there is room.
    let mut last_gap_x = 0;
    for (gx, gap) in &gaps {
        let gx = gx - COLUMN / 2;
        let _ = write!(
            svg,
            "<line x1=\"{gx}\" y1=\"{}\" x2=\"{gx}\" y2=\"{}\" stroke=\"#9e9e9e\" stroke-dasharray=\"2 3\"/>",
            top - 4,
            top + lanes_h + 4,
        );
        if gx >= last_gap_x + 60 {
            last_gap_x = gx;
            let _ = write!(
                svg,
                "<text x=\"{gx}\" y=\"{}\" fill=\"#616161\" text-anchor=\"middle\">+{}</text>",
                top + lanes_h + 30,
                ms(*gap)
            );
        }
        svg.push('\n');
    }
    // Marks, their words above, times below.
    let mut last_time_x = 0;
    for (m, &mx) in marks.iter().zip(&xs) {
        let s = style(m.kind);
        let w = m.columns * COLUMN;
        let cx = mx + w / 2;
        let cy = top + m.lane * LANE + LANE / 2;
        let _ = write!(svg, "<g><title>{}</title>", text(&m.title));
        let _ = write!(
            svg,
            "<line x1=\"{cx}\" y1=\"{}\" x2=\"{cx}\" y2=\"{}\" stroke=\"{}\" stroke-opacity=\"0.25\"/>",
            top - 6,
            cy - 6,
            s.colour
        );
        let _ = write!(
            svg,
            "<text transform=\"translate({},{}) rotate(-90)\" fill=\"{}\">{}</text>",
            cx + 4,
            top - 10,
            s.colour,
            text(&m.label)
        );
        shape(&mut svg, m, s.colour, mx, cx, cy, w);
        svg.push_str("</g>\n");
        if cx >= last_time_x + 70 && !m.never_ran {
            let _ = writeln!(
                svg,
                "<text x=\"{cx}\" y=\"{}\" fill=\"#424242\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
                top + lanes_h + 16,
                ms(m.t_ns.saturating_sub(first))
            );
            last_time_x = cx;
        }
    }
    // Legend and notes.
    for (i, kind) in LEGEND.iter().enumerate() {
        let s = style(*kind);
        let lx = 8 + (i % 3) * 330;
        let ly = legend_top + (i / 3) * 24;
        let _ = writeln!(
            svg,
            "<rect x=\"{lx}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            ly - 10,
            s.colour,
            lx + 18,
            ly,
            text(s.legend)
        );
    }
    let mut ny = legend_top + 24 * LEGEND.len().div_ceil(3);
    for m in untimed {
        let _ = writeln!(
            svg,
            "<text x=\"8\" y=\"{ny}\" fill=\"{}\">{UNTIMED}{}</text>",
            style(Kind::Report).colour,
            text(&cut(&m.line(), 125))
        );
        ny += 18;
    }
    if left_out > 0 {
        let _ = writeln!(
            svg,
            "<text x=\"8\" y=\"{ny}\" fill=\"#616161\">{left_out} earlier events left out: vkexit explain RUN_DIR tells them all</text>"
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn shape(svg: &mut String, m: &Mark, colour: &str, mx: usize, cx: usize, cy: usize, w: usize) {
    let dash = if m.never_ran {
        " stroke-dasharray=\"2 2\""
    } else {
        ""
    };
    let _ = match m.kind {
        _ if m.never_ran => write!(
            svg,
            "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"5\" fill=\"#fff\" stroke=\"{colour}\" stroke-width=\"1.5\"{dash}/>"
        ),
        Kind::Process => write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"3\" height=\"{}\" fill=\"{colour}\"/>",
            cx - 1,
            cy - 10,
            20
        ),
        Kind::HandlerRegistered => write!(
            svg,
            "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"5\" fill=\"#fff\" stroke=\"{colour}\" stroke-width=\"2\"/>"
        ),
        Kind::HandlerRan => write!(
            svg,
            "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"5.5\" fill=\"{colour}\"/>"
        ),
        Kind::Destructors => write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"12\" rx=\"3\" fill=\"{colour}\"/>",
            mx + 2,
            cy - 6,
            w - 4
        ),
        Kind::Library => write!(
            svg,
            "<path d=\"M{cx} {} l5 5 l-5 5 l-5 -5 z\" fill=\"{colour}\"/>",
            cy - 5
        ),
        Kind::Vulkan => write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>",
            cx - 5,
            cy - 5
        ),
        Kind::Driver => write!(
            svg,
            "<path d=\"M{cx} {} l6 10 l-12 0 z\" fill=\"{colour}\"/>",
            cy - 6
        ),
        Kind::Report => write!(
            svg,
            "<path d=\"M{} {} l12 0 l-6 11 z\" fill=\"{colour}\"/>",
            cx - 6,
            cy - 6
        ),
        Kind::Hang => write!(
            svg,
            "<path d=\"M{} {} l12 0 l-12 14 l12 0 z\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.5\"/>",
            cx - 6,
            cy - 7
        ),
        Kind::Crash => write!(
            svg,
            "<path d=\"M{} {} l14 14 m0 -14 l-14 14\" stroke=\"{colour}\" stroke-width=\"4\"/>",
            cx - 7,
            cy - 7
        ),
    };
}

/// "41.2 ms", "950 µs".
fn ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn story(timeline: &str, crash: &str) -> Story {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("timeline.jsonl"), timeline).unwrap();
        std::fs::write(dir.path().join("crash.jsonl"), crash).unwrap();
        Story::read(dir.path())
    }

    #[test]
    fn one_lane_per_thread_destructors_as_one_bar_and_what_the_crash_cut_off() {
        let mut t = String::from(
            r#"{"ev":"preload-loaded","t_ns":1000,"pid":7,"thread":"main","program":"/x/p"}
{"ev":"handler-registered","t_ns":2000,"pid":7,"thread":"main","id":1,"kind":"atexit","registrant":"/x/libvkexit_refrt.so"}
"#,
        );
        for id in 2..=400u64 {
            t.push_str(&format!("{{\"ev\":\"handler-registered\",\"t_ns\":{},\"pid\":7,\"thread\":\"main\",\"id\":{id},\"kind\":\"cxa-atexit\",\"registrant\":\"/l/libLLVM-15.so.1\"}}\n", 2000 + id));
        }
        t.push_str(
            r#"{"ev":"main-returned","t_ns":90000000,"pid":7,"thread":"main","status":0}
"#,
        );
        let crash = r#"{"ev":"crash","t_ns":90001000,"pid":7,"thread":"vkexit-tegra-0","signal":"SIGSEGV","pc":"0x1","pc_mapping":"unmapped","exiting":true}
"#;
        let svg = render(&story(&t, crash), &[], None);
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.contains(">main · pid 7</text>"), "{svg}");
        assert!(svg.contains(">vkexit-tegra-0 · pid 7</text>"), "{svg}");
        // 399 destructors: one bar, not 399 marks.
        assert_eq!(svg.matches("rx=\"3\"").count(), 1, "{svg}");
        assert!(
            svg.contains(">registered: 399 static destructors of libLLVM-15.so.1</text>"),
            "{svg}"
        );
        assert!(
            svg.contains("never ran: exit handler #1 (atexit, registered by libvkexit_refrt.so)"),
            "{svg}"
        );
        assert!(svg.contains("stroke-dasharray=\"2 2\""));
        // The long wait before exit is cut short and says how long it was.
        assert!(svg.contains(">+90.0 ms</text>"), "{svg}");
        assert!(roxmltree::Document::parse(&svg).is_ok(), "well-formed");
    }

    #[test]
    fn a_hang_is_drawn_last_on_its_threads_lane() {
        let s = story(
            r#"{"ev":"main-returned","t_ns":10,"pid":7,"thread":"main","status":0}
"#,
            "",
        );
        let hang = HangReport {
            threads: vec![crate::run::hang::ThreadState {
                pid: 7,
                tid: 8,
                name: "worker".into(),
                state: "S".into(),
                wchan: "futex_wait_queue".into(),
            }],
            backtraces: vec![],
            during_exit: true,
        };
        let svg = render(&s, &[], Some(&hang));
        assert!(svg.contains(">worker · pid 7</text>"), "{svg}");
        assert!(
            svg.contains(">HUNG: state S in futex_wait_queue, during exit</text>"),
            "{svg}"
        );
        assert!(svg.find("main returned 0") < svg.find("HUNG: state S"));
    }

    #[test]
    fn a_validation_message_goes_after_the_call_the_trace_saw_else_under_the_lanes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("trace.jsonl"),
            r#"{"ev":"create","t_ns":10,"thread":"main","call":"vkCreateDevice","type":"VkDevice","handle":"0xd1","parent":"0x1"}
{"ev":"destroy","t_ns":20,"thread":"main","call":"vkDestroyDevice","type":"VkDevice","handle":"0xd1","parent":"0x1"}
"#,
        )
        .unwrap();
        let story = Story::read(dir.path());
        let m = LayerMessage {
            id: "VUID-vkDestroyDevice-device-00378".into(),
            call: Some("vkDestroyDevice".into()),
            objects: vec!["VkDevice 0xd1".into(), "VkBuffer 0x2".into()],
            text: "VkBuffer 0x2 has not been destroyed.".into(),
        };
        let svg = render(&story, std::slice::from_ref(&m), None);
        let destroy = svg.find("vkDestroyDevice VkDevice 0xd1 on thread main</title>");
        let report = svg.find("validation: VUID-vkDestroyDevice-device-00378 in vkDestroyDevice");
        assert!(destroy.is_some() && report > destroy, "{svg}");
        assert!(!svg.contains("its log has no times; run with --trace"));

        let other = LayerMessage {
            objects: vec!["VkDevice 0xff".into()],
            ..m
        };
        let svg = render(&story, &[other], None);
        assert!(
            svg.contains("its log has no times; run with --trace"),
            "{svg}"
        );
    }
}
