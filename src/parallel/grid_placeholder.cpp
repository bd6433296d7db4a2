// parallel: the 4D grid and the tensor-parallel layers arrive with issues 3 and 4.
namespace axonn::parallel {}
