// Pictures of `perseus emulate`: saving vs straggler slowdown per method (SVG line plot) in a
// self-contained HTML page. Drawing code only: it never plans.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "perseus/emulate.hpp"

namespace perseus {

/// One line of a line plot: (x, y) points drawn in the order given, with a marker and a
/// tooltip at each point.
struct LineSeries {
  std::string label;                              ///< Legend text.
  std::vector<std::pair<double, double>> points;  ///< (x, y), in the axes' units.
  std::string color;                              ///< CSS colour; empty: the palette's next (Tableau 10).
};

/// What render_line_plot_svg() draws.
struct LinePlotData {
  std::string title;    ///< Above the plot (escaped); empty: none.
  std::string x_label;  ///< Axis titles (escaped).
  std::string y_label;
  std::vector<LineSeries> series;
  double width_px = 900;
  double height_px = 460;
  /// The x axis never starts below this (e.g. 1 for slowdown factors, which are >= 1: one
  /// slowdown alone was padded to 0.975–1.025). -infinity: no floor.
  double x_floor = -std::numeric_limits<double>::infinity();
};

/// A line plot as a standalone SVG document: nice ticks and a grid on both axes, the y axis
/// including 0, one colour per series (Tableau 10), <circle class="point"> markers with
/// "<label>: <x_label> x, <y_label> y" tooltips, and a legend to the right of the plot.
/// Non-finite points are skipped. Throws InputError if no series has a finite point.
std::string render_line_plot_svg(const LinePlotData& data);

/// What the emulation page says about the run (the inputs, for the page's caption).
struct EmulationReportInputs {
  std::string profile;  ///< Profile path as given.
  int num_ranks = 0;    ///< GPUs per pipeline (before TP).
  int microbatches = 0;  ///< Microbatches per iteration M.
  int tp_degree = 1;     ///< Tensor-parallel degree K.
  double time_scale = 1; ///< Time scale X, a dimensionless factor (EmulationConfig::time_scale).
  double p_block_w = 0;  ///< W.
};

/// The emulation page (what write_emulation_report() writes): a self-contained HTML5 page with
/// the total saving (cluster vs all-max with the same straggler, %) and the extrinsic saving
/// (vs the same method not adapting, %) against the straggler slowdown, one line per method,
/// and the table of every row. Throws InputError when there are no rows.
std::string emulation_report_html(const EmulationResult& result, const EmulationReportInputs& inputs);

/// Writes out_dir/emulation.html (atomically): a self-contained HTML5 page with the total
/// saving (cluster vs all-max with the same straggler, %) and the extrinsic saving (vs the same
/// method not adapting, %) against the straggler slowdown, one line per method, and the
/// table of every row. Returns the page's path. Throws InputError when there are no rows or
/// the page cannot be written.
std::string write_emulation_report(const EmulationResult& result, const EmulationReportInputs& inputs,
                                   const std::string& out_dir);

}  // namespace perseus
