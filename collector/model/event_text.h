// The model's text of an event: the byte strings the trace holds (events.proto's
// `bytes` fields: file names, argv, environments, ELF and Python names), as the model's
// messages hold them, escaped (text::Escape). Internal to the model layer.
#pragma once

#include "ldscope_proto/events.pb.h"

namespace ldscope::model {

// Escapes, in place, every `bytes` field of e's body and of the messages it holds, but
// for those the model reads as bytes: an ObjOpen's build-id (the model prints it in hex),
// a search's dir and base (the reader joined them into its candidate), and the ELF facts
// records (elf::FromFacts reads them).
void EscapeByteStrings(v1::Event* e);

}  // namespace ldscope::model
