#include "runnel/apps/train/g2p/g2p_report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace runnel::apps {

int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = int64_t(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = int64_t(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

void error_rates::add(const std::vector<int64_t>& predicted,
                      const std::vector<int64_t>& reference) {
  ++words;
  phones += int64_t(reference.size());
  int64_t d = edit_distance(predicted, reference);
  phone_errors += d;
  wrong_words += d > 0;
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '\'')
      out += "&apos;";
    else
      out += c;
  }
  return out;
}

} // namespace

status write_attention_svg(const std::string& path, const std::vector<attention_map>& maps) {
  const int cell = 22, label = 44, gap = 40, top = 40;
  int width = gap, height = top;
  for (auto& m : maps) {
    width += label + cell * int(m.word.size()) + gap;
    height = std::max(height, top + cell * (int(m.phones.size()) + 1) + gap);
  }
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='monospace' font-size='12'>\n<rect width='100%' height='100%' "
         "fill='white'/>\n<text x='"
      << gap << "' y='20'>g2p attention: letters across, phones down (darker = more "
      << "attention)</text>\n";
  int x0 = gap;
  for (auto& m : maps) {
    int gx = x0 + label;
    for (size_t j = 0; j < m.word.size(); ++j)
      svg << "<text x='" << gx + int(j) * cell + 7 << "' y='" << top + 14 << "'>"
          << escape(std::string(1, m.word[j])) << "</text>\n";
    for (size_t i = 0; i < m.phones.size() && i < m.weights.size(); ++i) {
      int y = top + cell * int(i + 1);
      svg << "<text x='" << x0 << "' y='" << y + 15 << "'>" << escape(m.phones[i]) << "</text>\n";
      for (size_t j = 0; j < m.word.size() && j < m.weights[i].size(); ++j) {
        int shade = 255 - int(std::clamp(m.weights[i][j], 0.0f, 1.0f) * 255.0f);
        svg << "<rect x='" << gx + int(j) * cell << "' y='" << y << "' width='" << cell
            << "' height='" << cell << "' fill='rgb(" << shade << "," << shade << "," << shade
            << ")' stroke='#ccc'><title>" << escape(m.phones[i]) << " / " << m.word[j] << ": "
            << m.weights[i][j] << "</title></rect>\n";
      }
    }
    x0 += label + cell * int(m.word.size()) + gap;
  }
  svg << "</svg>\n";
  auto tmp = path + ".tmp";
  std::ofstream out(tmp);
  out << svg.str();
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0)
    return data_loss("cannot write " + path);
  return {};
}

} // namespace runnel::apps
