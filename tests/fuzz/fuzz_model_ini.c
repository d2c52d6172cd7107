/* fuzz_model_ini: the model ini (model/model.h, model_load) under libFuzzer: the input is the
 * file, checked as fuzz_model.h says. */
#include "fuzz_model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_model_file("model.ini", data, size);
}
