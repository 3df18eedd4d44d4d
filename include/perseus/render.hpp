// Pictures of plans and frontiers (SVG) and the HTML report of an optimize folder.
// Drawing code only: it reads plans, it never plans. Output is plain SVG 1.1 / HTML5 text
// with no scripts and no external references, so it can be inlined, mailed or archived.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perseus/dag.hpp"
#include "perseus/plan.hpp"

namespace perseus {

/// Escapes text for XML/HTML character data and double-quoted attribute values:
/// & < > " ' become entities; other control characters (except tab, LF, CR), which XML 1.0
/// forbids, become U+FFFD. UTF-8 bytes pass through unchanged. Source: XML 1.0 §2.2, §2.4.
std::string xml_escape(std::string_view text);

/// An sRGB colour.
struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  /// "#rrggbb" (lower case).
  std::string hex() const;
  /// Relative luminance in [0, 1] (WCAG 2.x definition), to pick black or white text.
  double luminance() const;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

/// Continuous, perceptually uniform colour scale (matplotlib's "viridis", sampled at 9 stops
/// and interpolated linearly in sRGB) from min_value (dark blue) to max_value (yellow).
/// Values outside the range are clamped. A degenerate range (min == max) maps to the middle.
class ColorScale {
 public:
  ColorScale(double min_value, double max_value) : min_(min_value), max_(max_value) {}
  /// Colour of `value` (same unit as the range: W or MHz).
  Rgb operator()(double value) const;
  /// Colour at position t in [0, 1] along the scale (clamped).
  static Rgb at(double t);
  double min_value() const { return min_; }
  double max_value() const { return max_; }

 private:
  double min_ = 0, max_ = 1;
};

/// "Nice" axis ticks covering [lo, hi]: multiples of the smallest step 1, 2 or 5 × 10^k that
/// gives at most `max_ticks` (a value < 2 is raised to 2) of them, all inside [lo, hi]
/// (Heckbert, "Nice numbers for graph labels", Graphics Gems 1990). Returns an empty vector if
/// lo/hi are not finite; a single tick if lo == hi.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 8);

/// What a timeline box's fill colour shows.
enum class TimelineColor { kPower, kFrequency };

/// Layout and colouring of render_timeline_svg(). Sizes are SVG user units (px).
/// The time axis maps [0, T] linearly onto [label_width_px, width_px - right_margin_px]:
///   x(t_s) = label_width_px + t_s / T × (width_px - label_width_px - right_margin_px).
struct TimelineOptions {
  TimelineColor color_by = TimelineColor::kPower;
  double p_block_w = 0;        ///< Blocking power P_block (W): the colour of idle gaps.
  std::string title;           ///< Drawn above the chart (escaped); empty: no title.
  double width_px = 1200;      ///< Total width.
  double label_width_px = 64;  ///< Left margin holding the row names ("GPU 3").
  double right_margin_px = 16;
  double row_height_px = 24;  ///< Height of one rank's row.
  /// Colour-scale range (W for kPower, MHz for kFrequency). Unset: from the plan's values
  /// (and P_block for kPower), widened to nice ticks. Set it to share one scale across
  /// several timelines.
  std::optional<std::pair<double, double>> color_range;
  /// Right end of the time axis, s. Unset (or below the plan's T): the plan's T. Set it to the
  /// slowest T of several timelines to draw them on one time scale (the report's two did not:
  /// a 14 % slower plan looked as long).
  std::optional<double> time_end_s;
  bool outline_critical_path = true;  ///< Thick outline on the ops of one critical path.
  /// Prefix of the SVG ids (patterns, gradient) so several timelines can share one HTML page.
  std::string id_prefix = "tl-";
};

/// Colour-scale range render_timeline_svg() uses for `plan` with `options` (W or MHz).
std::pair<double, double> timeline_color_range(const FrequencyPlan& plan, const TimelineOptions& options);

/// One critical path of the plan's earliest-start timeline: op ids from a source to the op
/// that ends last, each starting when the previous one ends (ties: same rank first).
/// Empty when the DAG has no ops. Source: critical path method (Kelley & Walker 1959).
std::vector<int> critical_path(const Dag& dag, const Timeline& timeline);

/// Pipeline timeline of `plan` on `dag` as a standalone SVG document: one row per rank (GPU),
/// one <rect class="op KIND"> per computation at x(start_s) with width ∝ duration,
/// filled with the colour of its average power energy_j / time_s (W) or its frequency (MHz)
/// on a ColorScale whose legend is drawn below the axis; rows are backed by the colour of
/// P_block (idle/blocking time) in power mode. Kinds look different: forward plain,
/// backward hatched "/", backward_input hatched "\", backward_weight dotted. Labels
/// ("F3" = forward of microbatch 3, 0-based) are dropped when they do not fit in the box.
/// Every box has a <title> tooltip. Throws std::invalid_argument if the plan's per-op
/// arrays do not have dag.num_ops() entries.
std::string render_timeline_svg(const Dag& dag, const FrequencyPlan& plan, const TimelineOptions& options = {});

/// A labelled point of a time–energy plot: iteration time (s), iteration energy (J).
struct PlotPoint {
  std::string label;
  double time_s = 0;
  double energy_j = 0;
  /// CSS colour of a named point's marker (baselines); empty: the next colour no method uses.
  std::string color;
};

/// A named set of points drawn with one marker and colour (e.g. a baseline's candidate plans).
struct PlotSeries {
  std::string label;              ///< Legend text.
  std::vector<PlotPoint> points;  ///< Each point's label goes into its tooltip.
  std::string color;              ///< CSS colour of the markers; empty: the next colour no method uses.
};

/// The colour of a method in every picture (the frontier plot, the emulation page): "perseus"
/// blue, "all_max" red, "zeus_global" orange, "zeus_per_stage" green, "envpipe" purple
/// (kEmulationMethods names). Empty for another name.
std::string method_color(std::string_view method);
/// How pictures and pages name a method: "Perseus", "all-max", "ZeusGlobal", "ZeusPerStage",
/// "EnvPipe"; another name is returned as it is.
std::string method_display_name(std::string_view method);

/// What render_frontier_svg() draws. Energies of all series must be in the same accounting
/// (e.g. one pipeline, raw profile units) for the picture to be meaningful.
struct FrontierPlotData {
  std::vector<PlotPoint> frontier;   ///< Our frontier, drawn as a line (sorted by time).
  std::vector<PlotPoint> plans;      ///< Plans written to disk: dots with tooltips.
  std::string plans_label = "plans written";  ///< Legend text of the dots.
  /// Certified lower bound LB(T) on the energy of any plan with iteration time <= T (J),
  /// drawn as a dotted line under the frontier; empty: not drawn.
  std::vector<PlotPoint> lower_bound;
  std::optional<PlotPoint> all_max;  ///< The all-max-frequency baseline: a square.
  std::vector<PlotPoint> baselines;  ///< Other named points (ZeusGlobal, EnvPipe, ...): diamonds.
  std::vector<PlotSeries> candidates;  ///< Baselines' candidate plans: one marker colour per series.
  std::vector<PlotPoint> reference;  ///< Optional reference frontier: a dashed line.
  std::string reference_label = "reference";
};

/// Layout of render_frontier_svg() (SVG px).
struct FrontierPlotOptions {
  std::string title;
  double width_px = 900;
  double height_px = 540;
};

/// Iteration time (s, x) vs iteration energy (J or kJ, y) plot as a standalone SVG document
/// with nice ticks, a grid and a legend. Axis ranges cover every point given, padded by 4%.
/// Plans are <circle class="plan"> whose <title> reads "<label>: <time> s, <energy> J".
/// Large series are thinned to about one vertex per pixel column. Throws InputError if no
/// series has a finite point.
std::string render_frontier_svg(const FrontierPlotData& data, const FrontierPlotOptions& options = {});

/// Layout of render_frequency_histogram_svg() (SVG px).
struct HistogramOptions {
  std::string title;
  double width_px = 900;
  double row_height_px = 44;
  /// Clocks the x axis must cover, MHz, e.g. the profile's, so several histograms share one
  /// axis; a bar is as wide as the greatest common divisor of the gaps between these clocks and
  /// the plan's (a plan using 2 clocks 300 MHz apart drew 240 MHz-wide bars). Empty: the plan's.
  std::vector<int> axis_clocks_mhz;
};

/// Per-stage histogram of the plan's frequencies as a standalone SVG document: one row per
/// stage, x = frequency (MHz), stacked bars per kind (computations at that frequency,
/// scaled to the stage's largest bin; counts in tooltips). Throws std::invalid_argument when
/// plan.freq_mhz does not have one entry per computation of `dag` (dag.num_ops()).
std::string render_frequency_histogram_svg(const Dag& dag, const FrequencyPlan& plan,
                                           const HistogramOptions& options = {});

/// Most named points load_plot_points_csv() reads with require_label (each is labelled).
inline constexpr std::size_t kMaxNamedPlotPoints = 1000;

/// Reads a CSV of time–energy points: columns time_s or time (s), energy_j or energy (J),
/// and a label column named name, method, label or plan (any order, extra columns ignored;
/// simple RFC 4180 quoting); without one (allowed unless `require_label`) rows get their
/// 0-based row number. Throws InputError naming file, line and field on a missing column, a
/// ragged row or a non-numeric / non-finite value, on a profile CSV (stage and instruction
/// columns: times of single computations, not iteration points), and, with require_label, on
/// more than kMaxNamedPlotPoints rows.
std::vector<PlotPoint> load_plot_points_csv(const std::string& path, bool require_label = false);

/// Options of write_report().
struct ReportOptions {
  std::string profile_path;     ///< Override summary.json's inputs.profile (empty: use it).
  std::string reference_csv;    ///< Optional reference frontier CSV (time,energy) for the plot.
  std::string reference_label;  ///< Legend text of the reference (default: its file name).
  std::string points_csv;       ///< Optional labelled baseline points (name,time_s,energy_j).
  /// Also write the pictures as standalone SVG files beside the report: frontier.svg,
  /// timeline_fastest.svg, timeline_lowest_energy.svg (each atomically).
  bool write_svgs = false;
  /// Called with each caveat that the report also notes in the page (e.g. no profile found,
  /// so boxes are coloured by frequency); the CLI prints them on stderr. May be empty.
  std::function<void(const std::string&)> on_warning;
};

/// Writes DIR/report.html for an `optimize` output folder DIR: one self-contained HTML5
/// file (inline SVG and CSS; no scripts, no network) with the summary table, the frontier
/// plot, the timelines of the T_min plan and of the lowest-energy written plan (on one
/// power scale), their per-stage frequency histograms, and the emulation table when
/// DIR/emulation.csv exists. The DAG is rebuilt from summary.json's inputs (schedule,
/// stages, microbatches, chunks; a schedule CSV path that is not found falls back to the
/// DIR/schedule.csv optimize wrote) and the profile gives each computation's power: options.
/// profile_path, else DIR/profile.csv (the copy optimize writes), else inputs.profile
/// (resolved against the working directory, then DIR); without a readable profile boxes are
/// coloured by frequency and options.on_warning is called. The file is written to a temporary name and renamed.
/// Returns the report's path. Throws InputError naming the file (and field) when DIR or
/// summary.json is missing, JSON is malformed or lacks a field, a plan does not match the
/// schedule or profile, or the report cannot be written.
std::string write_report(const std::string& dir, const ReportOptions& options = {});

}  // namespace perseus
