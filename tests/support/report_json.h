// Reads back the JSON that render::Json writes (enum words, 64-bit integers as strings,
// null for a message not set) into the message it was written from, as a user's tool
// would read `report --format json`.
#pragma once

#include <string>

#include <google/protobuf/message.h>

namespace ldscope::testing {

// False (with *why set) when json is not such a text of m's type.
bool ParseJson(const std::string& json, google::protobuf::Message* m, std::string* why = nullptr);

}  // namespace ldscope::testing
