// cli/npy.h — NumPy .npy files (v1.0, little-endian, C order) for the debug commands'
// outputs, which the Python tests load with numpy.load.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace nextn {

// descr: the numpy type string ("<f4", "|u1", "<i8"); data holds prod(shape) elements.
void write_npy_file(const std::string& path, const char* descr, const std::vector<size_t>& shape, const void* data,
                    size_t elem_size);

}  // namespace nextn
