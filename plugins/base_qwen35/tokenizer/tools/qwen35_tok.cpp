// qwen35-tok: the tokenizer from the command line.
//   qwen35-tok synthetic OUT.json VOCAB_SIZE      write the synthetic tokenizer.json
//   qwen35-tok encode TOKENIZER.json < text        print the ids of stdin, space-separated
//   qwen35-tok decode TOKENIZER.json ID...         print the text of the ids
//   qwen35-tok bench TOKENIZER.json FILE [REPEAT]  load time and encode throughput on FILE
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "qgpu/qwen35/tokenizer.h"

namespace {

using qgpu::qwen35::TokenId;
using qgpu::qwen35::Tokenizer;
using Clock = std::chrono::steady_clock;

int fail(const qgpu::sdk::Status& s) {
  std::fprintf(stderr, "qwen35-tok: %s\n", s.to_string().c_str());
  return s.code() == qgpu::sdk::ErrorCode::kIoError ? 1 : 2;
}

int usage() {
  std::fprintf(
      stderr,
      "usage: qwen35-tok synthetic OUT.json VOCAB_SIZE | encode TOKENIZER.json | decode TOKENIZER.json ID... | "
      "bench TOKENIZER.json FILE [REPEAT]\n");
  return 2;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  std::string cmd = argv[1];
  if (cmd == "synthetic") {
    if (argc != 4) return usage();
    auto s = qgpu::qwen35::write_synthetic_tokenizer(argv[2], std::atoi(argv[3]));
    return s.is_ok() ? 0 : fail(s);
  }
  auto t0 = Clock::now();
  auto tok = Tokenizer::load(argv[2]);
  if (!tok) return fail(tok.error());
  double load_s = seconds_since(t0);
  if (cmd == "encode") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    auto ids = tok->encode(text);
    if (!ids) return fail(ids.error());
    std::string out;
    for (std::size_t i = 0; i < ids->size(); ++i) out += (i ? " " : "") + std::to_string((*ids)[i]);
    std::printf("%s\n", out.c_str());
    return 0;
  }
  if (cmd == "decode") {
    std::vector<TokenId> ids;
    for (int i = 3; i < argc; ++i) ids.push_back(std::atoi(argv[i]));
    auto text = tok->decode(ids);
    if (!text) return fail(text.error());
    std::fwrite(text->data(), 1, text->size(), stdout);
    return 0;
  }
  if (cmd == "bench") {
    if (argc < 4) return usage();
    std::ifstream in(argv[3], std::ios::binary);
    if (!in) return fail(qgpu::sdk::io_error(std::string("cannot open '") + argv[3] + "'"));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    int repeat = argc > 4 ? std::atoi(argv[4]) : 20;
    // Line by line, as a serving loop would call it; the first pass warms the piece cache.
    std::vector<std::string> lines;
    for (std::size_t a = 0, b; a < text.size(); a = b + 1) {
      b = text.find('\n', a);
      if (b == std::string::npos) b = text.size();
      lines.push_back(text.substr(a, b - a + (b < text.size() ? 1 : 0)));
    }
    std::size_t n_ids = 0;
    auto t1 = Clock::now();
    for (int r = 0; r < repeat; ++r) {
      for (const auto& l : lines) {
        auto ids = tok->encode(l);
        if (!ids) return fail(ids.error());
        n_ids += ids->size();
      }
    }
    double s = seconds_since(t1);
    double mb = static_cast<double>(text.size()) * repeat / 1e6;
    std::printf("load %.3f s; encode %.2f MB in %.3f s = %.1f MB/s, %.0f tokens/s (%zu lines x %d)\n", load_s, mb, s,
                mb / s, static_cast<double>(n_ids) / s, lines.size(), repeat);
    return 0;
  }
  return usage();
}
