// Safetensors reader and writer: round trips and hand-crafted malformed files.
#include "qgpu/qwen35/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "test_util.h"

namespace qgpu::qwen35 {
namespace {

using test::read_file;
using test::st_bytes;
using test::TempDir;
using test::write_file;

std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// The one-line error for a file holding `bytes`.
std::string open_error(const TempDir& dir, const std::string& bytes, const std::string& name = "bad.safetensors") {
  write_file(dir / name, bytes);
  auto f = SafetensorsFile::open(dir / name);
  if (f) return "(opened)";
  EXPECT_EQ(f.error().to_string().find('\n'), std::string::npos);
  return f.error().to_string();
}

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
  TempDir dir;
  const float f32[] = {1.5f, -0.0f, std::numeric_limits<float>::infinity(), 3.25f};
  const std::uint16_t bf16[] = {0x3f80, 0xc000, 0x0001, 0x7f80, 0x4049, 0x8000};  // 1, -2, tiny, inf, 3.140625, -0
  const std::uint16_t f16[] = {0x3c00, 0x0001};                                   // 1, 2^-24
  const std::int64_t i64[] = {-5, 1ll << 40};
  const std::uint8_t u8[] = {7, 8, 9};
  std::vector<TensorToWrite> tensors;
  tensors.push_back(tensor_from_bytes("w.f32", StDType::kF32, {2, 2}, std::as_bytes(std::span(f32))));
  tensors.push_back(tensor_from_bytes("w.bf16", StDType::kBF16, {2, 3}, std::as_bytes(std::span(bf16))));
  tensors.push_back(tensor_from_bytes("w.f16", StDType::kF16, {2}, std::as_bytes(std::span(f16))));
  tensors.push_back(tensor_from_bytes("ids", StDType::kI64, {2}, std::as_bytes(std::span(i64))));
  tensors.push_back(tensor_from_bytes("mask", StDType::kU8, {3}, std::as_bytes(std::span(u8))));
  tensors.push_back(tensor_from_bytes("scalar", StDType::kF32, {}, std::as_bytes(std::span(f32, 1))));
  tensors.push_back(tensor_from_bytes("empty", StDType::kBF16, {0, 7}, {}));
  WriteOptions options;
  options.metadata = {{"format", "pt"}, {"note", "a \"quoted\"\nline"}};
  ASSERT_TRUE(write_safetensors(dir / "rt.safetensors", std::move(tensors), options).is_ok());

  const std::string bytes = read_file(dir / "rt.safetensors");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes";

  auto file = SafetensorsFile::open(dir / "rt.safetensors");
  ASSERT_TRUE(file) << file.error().to_string();
  const auto& h = (*file)->header();
  EXPECT_EQ(h.tensors.size(), 7u);
  EXPECT_EQ(h.metadata.at("note"), "a \"quoted\"\nline");
  EXPECT_EQ(h.metadata.at("format"), "pt");

  auto check = [&](const char* name, StDType dtype, std::vector<std::int64_t> shape, const void* data,
                   std::size_t nbytes) {
    const TensorInfo* info = (*file)->find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, dtype) << name;
    EXPECT_EQ(info->shape, shape) << name;
    auto ref = (*file)->ref(*info);
    ASSERT_EQ(ref.bytes().size(), nbytes) << name;
    if (nbytes) {
      EXPECT_EQ(std::memcmp(ref.data, data, nbytes), 0) << name;
    }
  };
  check("w.f32", StDType::kF32, {2, 2}, f32, sizeof f32);
  check("w.bf16", StDType::kBF16, {2, 3}, bf16, sizeof bf16);
  check("w.f16", StDType::kF16, {2}, f16, sizeof f16);
  check("ids", StDType::kI64, {2}, i64, sizeof i64);
  check("mask", StDType::kU8, {3}, u8, sizeof u8);
  check("scalar", StDType::kF32, {}, f32, 4);
  check("empty", StDType::kBF16, {0, 7}, nullptr, 0);

  // Wider dtypes first, so every element is aligned once the header is padded.
  for (const auto& t : h.tensors) EXPECT_EQ((h.data_offset + t.begin) % st_dtype_size(t.dtype), 0u) << t.name;

  auto bf = to_f32((*file)->ref(*(*file)->find("w.bf16")));
  ASSERT_TRUE(bf);
  EXPECT_EQ((*bf)[0], 1.0f);
  EXPECT_EQ((*bf)[1], -2.0f);
  EXPECT_EQ((*bf)[2], 0x1p-133f);
  EXPECT_EQ((*bf)[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ((*bf)[4], 3.140625f);
  EXPECT_TRUE(std::signbit((*bf)[5]));
  auto hf = to_f32((*file)->ref(*(*file)->find("w.f16")));
  ASSERT_TRUE(hf);
  EXPECT_EQ((*hf)[0], 1.0f);
  EXPECT_EQ((*hf)[1], 0x1p-24f);

  auto ids = to_f32((*file)->ref(*(*file)->find("ids")));
  ASSERT_FALSE(ids);
  EXPECT_EQ(ids.error().message(), "tensor 'ids' has dtype I64, not a float type (BF16, F16, F32)");

  auto view = (*file)->ref(*(*file)->find("w.bf16")).view();
  ASSERT_TRUE(view);
  EXPECT_EQ(view->dtype, sdk::DType::kBF16);
  EXPECT_EQ(view->rank, 2);
  EXPECT_EQ(view->shape[0], 2);
  EXPECT_EQ(view->shape[1], 3);
}

TEST(Safetensors, SameInputSameBytes) {
  TempDir dir;
  const float v[] = {1, 2, 3};
  for (const char* name : {"a.safetensors", "b.safetensors"}) {
    std::vector<TensorToWrite> t;
    t.push_back(tensor_from_bytes("z", StDType::kF32, {3}, std::as_bytes(std::span(v))));
    t.push_back(tensor_from_bytes("a", StDType::kF32, {1}, std::as_bytes(std::span(v, 1))));
    ASSERT_TRUE(write_safetensors(dir / name, std::move(t)).is_ok());
  }
  EXPECT_EQ(read_file(dir / "a.safetensors"), read_file(dir / "b.safetensors"));
  // Exact bytes, typed by hand from the format description.
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string data(reinterpret_cast<const char*>(v), 4);
  data += std::string(reinterpret_cast<const char*>(v), 12);
  EXPECT_EQ(read_file(dir / "a.safetensors"), st_bytes(padded, data));
}

TEST(Safetensors, WriterRefusesBadInput) {
  TempDir dir;
  const float v[] = {1};
  std::vector<TensorToWrite> t;
  t.push_back(tensor_from_bytes("x", StDType::kF32, {1}, std::as_bytes(std::span(v))));
  t.push_back(tensor_from_bytes("x", StDType::kF32, {1}, std::as_bytes(std::span(v))));
  EXPECT_EQ(write_safetensors(dir / "w.safetensors", std::move(t)).message(), "duplicate tensor name 'x'");
  std::vector<TensorToWrite> u;
  u.push_back(tensor_from_bytes("x", StDType::kF32, {2}, std::as_bytes(std::span(v))));
  EXPECT_EQ(write_safetensors(dir / "w.safetensors", std::move(u)).message(),
            "tensor 'x': holds 4 bytes, shape needs 8");
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors.partial"));
}

TEST(Safetensors, ShardedRoundTrip) {
  TempDir dir;
  std::vector<float> big(100, 0.5f), small(3, 2.0f);
  std::vector<TensorToWrite> t;
  t.push_back(tensor_from_bytes("s1", StDType::kF32, {3}, std::as_bytes(std::span(small))));
  t.push_back(tensor_from_bytes("big", StDType::kF32, {10, 10}, std::as_bytes(std::span(big))));  // 400 > limit
  t.push_back(tensor_from_bytes("s2", StDType::kF32, {3}, std::as_bytes(std::span(small))));
  t.push_back(tensor_from_bytes("s3", StDType::kF32, {3}, std::as_bytes(std::span(small))));
  WriteOptions options;
  options.max_shard_bytes = 30;
  auto files = write_checkpoint_tensors(dir.path(), std::move(t), options);
  ASSERT_TRUE(files) << files.error().to_string();
  // s1 | big (alone, over the limit) | s2 s3 (24 bytes) + the index.
  ASSERT_EQ(files->size(), 4u);
  EXPECT_EQ(files->at(0).filename(), "model-00001-of-00003.safetensors");
  EXPECT_EQ(files->at(3).filename(), "model.safetensors.index.json");
  const std::string index = read_file(dir / "model.safetensors.index.json");
  EXPECT_NE(index.find("\"total_size\": 436"), std::string::npos) << index;
  EXPECT_NE(index.find("\"s3\": \"model-00003-of-00003.safetensors\""), std::string::npos) << index;

  auto store = TensorStore::open_dir(dir.path());
  ASSERT_TRUE(store) << store.error().to_string();
  EXPECT_EQ(store->size(), 4u);
  EXPECT_EQ(store->files().size(), 3u);
  auto b = store->get("big");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->shape(), (std::vector<std::int64_t>{10, 10}));
  auto values = to_f32(*b);
  ASSERT_TRUE(values);
  EXPECT_EQ(*values, big);
  EXPECT_EQ(store->get("nope").error().message(), "no tensor 'nope' in the checkpoint");
}

// --- Malformed files: each gives exactly this one-line error.

TEST(SafetensorsMalformed, TooShort) {
  TempDir dir;
  EXPECT_EQ(open_error(dir, "abcde"),
            (dir / "bad.safetensors").string() + ": error: file is 5 bytes, too short for the 8-byte header length");
  EXPECT_EQ(open_error(dir, ""),
            (dir / "bad.safetensors").string() + ": error: file is 0 bytes, too short for the 8-byte header length");
}

TEST(SafetensorsMalformed, TruncatedHeader) {
  TempDir dir;
  EXPECT_EQ(open_error(dir, st_bytes(std::string(20, ' '), "", 100)),
            (dir / "bad.safetensors").string() +
                ": error: header length 100 runs past the end of the file (28 bytes, short by 80)");
}

TEST(SafetensorsMalformed, HugeHeaderLength) {
  TempDir dir;
  write_file(dir / "bad.safetensors", st_bytes("{}", "", 1ull << 40));
  auto f = SafetensorsFile::open(dir / "bad.safetensors");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), sdk::ErrorCode::kLimitExceeded);
  EXPECT_EQ(f.error().message(), "header length 1099511627776 exceeds the limit of 100000000 bytes by 1099411627776");
  // The largest length a 64-bit field can hold must not wrap any arithmetic.
  EXPECT_EQ(open_error(dir, st_bytes("{}", "", ~0ull)),
            (dir / "bad.safetensors").string() +
                ": error: header length 18446744073709551615 exceeds the limit of 100000000 bytes by "
                "18446744073609551615");
}

struct HeaderCase {
  const char* what;
  std::string header;
  std::string data;
  std::string error;  // after "<file>: error: "
};

class SafetensorsHeaderCase : public ::testing::TestWithParam<HeaderCase> {};

TEST_P(SafetensorsHeaderCase, ExactError) {
  const auto& c = GetParam();
  const std::string bytes = st_bytes(c.header, c.data);
  auto parsed = parse_safetensors(as_bytes(bytes), "x.safetensors");
  ASSERT_FALSE(parsed) << c.what;
  EXPECT_EQ(parsed.error().to_string(), "x.safetensors: error: " + c.error) << c.what;
}

const std::string k8(8, '\0');
const std::string k12(12, '\0');

INSTANTIATE_TEST_SUITE_P(
    Cases, SafetensorsHeaderCase,
    ::testing::Values(
        HeaderCase{"bad json", R"({"a": {"dtype": "F32",)", "", "header is not valid JSON (error at header byte 23)"},
        HeaderCase{"number beyond double", R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,0]}})", "",
                   "header is not valid JSON (a number is out of range)"},
        HeaderCase{"not an object", "[1, 2]", "", "header does not start with '{'"},
        HeaderCase{"invalid utf-8", "{\"\xff\": 1}", "", "header is not valid JSON (error at header byte 3)"},
        HeaderCase{"offsets past data", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                   std::string(4, '\0'), "tensor 'a': data_offsets [0, 8] end past the data area of 4 bytes"},
        HeaderCase{
            "overlap",
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            k12, "tensor 'b' [4, 12) overlaps tensor 'a' [0, 8)"},
        HeaderCase{
            "same offsets",
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
            k8, "tensor 'b' [0, 8) overlaps tensor 'a' [0, 8)"},
        HeaderCase{
            "hole",
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            k12, "data bytes [4, 8) before tensor 'b' belong to no tensor"},
        HeaderCase{"trailing bytes", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", k8,
                   "data bytes [4, 8) at the end belong to no tensor"},
        HeaderCase{"dtype x shape mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", k8,
                   "tensor 'a': data_offsets [0, 8] hold 8 bytes but shape [3] of F32 needs 12"},
        HeaderCase{"shape overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                   k8, "tensor 'a': shape [4294967296, 4294967296] of F32 overflows a 64-bit byte count"},
        HeaderCase{"byte count overflow", R"({"a":{"dtype":"F32","shape":[9223372036854775807],"data_offsets":[0,8]}})",
                   k8, "tensor 'a': shape [9223372036854775807] of F32 overflows a 64-bit byte count"},
        HeaderCase{"dim above int64", R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,8]}})", k8,
                   "tensor 'a': shape[0] = 18446744073709551615 exceeds 2^63-1"},
        HeaderCase{"negative dim", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", "",
                   "tensor 'a': shape[0] must be a non-negative integer, got -1"},
        HeaderCase{"fractional dim", R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})", "",
                   "tensor 'a': shape[0] must be a non-negative integer, got 1.5"},
        HeaderCase{"begin after end", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", k8,
                   "tensor 'a': data_offsets [8, 4] end before they begin"},
        HeaderCase{"three offsets", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0,0]}})", "",
                   "tensor 'a': data_offsets must be an array of two integers"},
        HeaderCase{"negative offset", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[-4,0]}})", "",
                   "tensor 'a': data_offsets must be non-negative integers"},
        HeaderCase{"unknown dtype", R"({"a":{"dtype":"Q4_K","shape":[0],"data_offsets":[0,0]}})", "",
                   "tensor 'a': unknown or unsupported dtype 'Q4_K'"},
        HeaderCase{"missing dtype", R"({"a":{"shape":[0],"data_offsets":[0,0]}})", "", "tensor 'a': missing 'dtype'"},
        HeaderCase{"entry not object", R"({"a":[1]})", "", "tensor 'a': expected an object, got an array"},
        HeaderCase{
            "duplicate tensor",
            R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})",
            "", "duplicate key 'a' in header"},
        HeaderCase{"metadata not strings", R"({"__metadata__":{"n":1}})", "",
                   "__metadata__ entry 'n' must be a string, got 1"},
        HeaderCase{"hostile name", "{\"a\\nb\\u0000\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}", "",
                   "tensor 'a\\x0ab\\x00': unknown or unsupported dtype 'X'"}),
    [](const ::testing::TestParamInfo<HeaderCase>& info) {
      std::string name = info.param.what;
      for (auto& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(SafetensorsMalformed, HeaderPaddingAndMetadataAccepted) {
  const std::string bytes = st_bytes(R"({"__metadata__":{"k":"v"},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})"
                                     "     ",
                                     "xy");
  auto parsed = parse_safetensors(as_bytes(bytes), "ok.safetensors");
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->metadata.at("k"), "v");
  EXPECT_EQ(parsed->tensors.at(0).nbytes(), 2u);
}

TEST(SafetensorsDir, MissingShard) {
  TempDir dir;
  write_file(dir / "model-00001-of-00002.safetensors",
             st_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"));
  write_file(
      dir / "model.safetensors.index.json",
      R"({"metadata":{"total_size":2},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto store = TensorStore::open_dir(dir.path());
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().to_string(),
            (dir / "model.safetensors.index.json").string() +
                ": error: shard 'model-00002-of-00002.safetensors' (for tensor 'b') does not exist");
}

TEST(SafetensorsDir, IndexNamesTensorNotInShard) {
  TempDir dir;
  write_file(dir / "s.safetensors", st_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"));
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"s.safetensors","c":"s.safetensors"}})");
  auto store = TensorStore::open_dir(dir.path());
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().to_string(), (dir / "model.safetensors.index.json").string() +
                                           ": error: tensor 'c' is mapped to 's.safetensors' but that shard does "
                                           "not contain it");
}

TEST(SafetensorsDir, IndexCannotLeaveTheDirectory) {
  TempDir dir;
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"../s.safetensors"}})");
  auto store = TensorStore::open_dir(dir.path());
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().message(),
            "weight_map['a'] = '../s.safetensors' is not a plain file name in the checkpoint directory");
}

TEST(SafetensorsDir, BadIndexJsonHasLineAndColumn) {
  TempDir dir;
  write_file(dir / "model.safetensors.index.json", "{\n  \"weight_map\": {\n    \"a\": ]\n}");
  auto store = TensorStore::open_dir(dir.path());
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().to_string(), (dir / "model.safetensors.index.json").string() + ":3:10: error: invalid JSON");
}

TEST(SafetensorsDir, ShardErrorNamesTheShard) {
  TempDir dir;
  write_file(dir / "s.safetensors", st_bytes("{}", "", 50));
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"s.safetensors"}})");
  auto store = TensorStore::open_dir(dir.path());
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().to_string(), (dir / "s.safetensors").string() +
                                           ": error: header length 50 runs past the end of the file (10 bytes, "
                                           "short by 48)");
}

TEST(SafetensorsDir, NothingThere) {
  TempDir dir;
  auto store = TensorStore::open_dir(dir.path());
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().message(),
            dir.path().string() + ": no model.safetensors.index.json and no model.safetensors");
}

TEST(SafetensorsDir, SingleFileFallback) {
  TempDir dir;
  write_file(dir / "model.safetensors",
             st_bytes(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\1\0", 2)));
  auto store = TensorStore::open_dir(dir.path());
  ASSERT_TRUE(store) << store.error().to_string();
  EXPECT_EQ(store->non_float_tensors(), std::vector<std::string>{"a (BOOL)"});
}

TEST(Conversions, HalfAndBfloat) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);    // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), 0x3ffp-24f);  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);    // smallest normal
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc0a0), -5.0f);
  // Round to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7.
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);                        // tie, rounds up to even
  EXPECT_EQ(f32_to_bf16(0x1.010002p+0f), 0x3f81);                     // just above the tie
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace qgpu::qwen35
