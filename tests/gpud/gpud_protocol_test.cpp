// parse_request(): every request is validated before anything is done with it.
#include <gtest/gtest.h>

#include "perseus/gpud/protocol.hpp"

namespace {

using perseus::gpud::LineBuffer;
using perseus::gpud::Op;
using perseus::gpud::parse_request;
using perseus::gpud::ProtocolError;

std::string refusal(const std::string& line) {
  try {
    parse_request(line);
  } catch (const ProtocolError& e) {
    EXPECT_EQ(e.code(), "bad_request");
    return e.what();
  }
  return "accepted";
}

TEST(GpudProtocol, ValidRequestsParse) {
  EXPECT_EQ(parse_request(R"({"op":"hello"})").op, Op::kHello);
  const auto lock = parse_request(R"({"op":"lock","gpu":3,"mhz":1410})");
  EXPECT_EQ(lock.op, Op::kLock);
  EXPECT_EQ(lock.gpu, 3);
  EXPECT_EQ(lock.mhz, 1410);
  EXPECT_EQ(parse_request(R"({"gpu":0,"op":"unlock"})").op, Op::kUnlock);
  EXPECT_EQ(parse_request(R"({"op":"clocks","gpu":255})").gpu, 255);
  EXPECT_EQ(parse_request(R"({"op":"energy","gpu":0})").op, Op::kEnergy);
  // format_request is what the client sends: it parses back to the same request.
  const auto back = parse_request(perseus::gpud::format_request(lock).substr(0, 40));
  EXPECT_EQ(back.mhz, 1410);
}

TEST(GpudProtocol, MalformedRequestsAreRefusedWithTheReason) {
  EXPECT_NE(refusal("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal("[1,2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(refusal("{}").find("'op'"), std::string::npos);
  // A repeated key would keep the last value silently (lock GPU 1 while naming GPU 0 first).
  EXPECT_NE(refusal(R"({"op":"lock","gpu":0,"gpu":1,"mhz":1410})").find("'gpu' appears more than once"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"op":"set_power_limit","gpu":0})").find("unknown op 'set_power_limit'"), std::string::npos);
  // A NUL or escape byte in the op is shown as \xNN, not copied (it cut the message short).
  EXPECT_NE(refusal(R"({"op":"lo\u0000ck\u001b","gpu":0})").find("unknown op 'lo\\x00ck\\x1b' (expected"), std::string::npos)
      << refusal(R"({"op":"lo\u0000ck\u001b","gpu":0})");
  EXPECT_NE(refusal(R"({"op":"lock","gpu":0})").find("missing field 'mhz'"), std::string::npos);
  EXPECT_NE(refusal(R"({"op":"lock","gpu":"0","mhz":1410})").find("'gpu' must be an integer"), std::string::npos);
  EXPECT_NE(refusal(R"({"op":"lock","gpu":-1,"mhz":1410})").find("0..255, got -1"), std::string::npos);
  EXPECT_NE(refusal(R"({"op":"lock","gpu":0,"mhz":2147483648})").find("1..100000"), std::string::npos);
  EXPECT_NE(refusal(R"({"op":"lock","gpu":0,"mhz":1.5e3})").find("must be an integer"), std::string::npos);
  EXPECT_NE(refusal(R"({"op":"clocks","gpu":0,"mhz":1410})").find("unexpected field 'mhz'"), std::string::npos);
  EXPECT_NE(refusal(std::string(600, ' ')).find("longer than 512 bytes"), std::string::npos);
  // A raw NUL ended the text for the JSON parser: the lock before it was executed (session 20).
  const std::string cut = std::string(R"({"op":"lock","gpu":0,"mhz":1410})") + '\0' + "this is not JSON";
  EXPECT_NE(refusal(cut).find("a NUL byte at column 33"), std::string::npos) << refusal(cut);
}

TEST(GpudProtocol, LineBufferSplitsLinesAndNeverHoldsAnOversizedOne) {
  LineBuffer b(8);
  ASSERT_TRUE(b.append("ab\ncd", 5));
  EXPECT_EQ(*b.next_line(), "ab");
  EXPECT_FALSE(b.next_line().has_value());
  ASSERT_TRUE(b.append("ef\r\n", 4));
  EXPECT_EQ(*b.next_line(), "cdef");
  // 9 bytes without a newline: refused, and what is held stays bounded.
  EXPECT_FALSE(b.append("123456789", 9));
  EXPECT_TRUE(b.overflowed());
  EXPECT_LE(b.pending_bytes(), 9u);
  EXPECT_FALSE(b.append("\n", 1));
}

}  // namespace
