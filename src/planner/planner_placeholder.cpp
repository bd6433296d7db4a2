// planner: the performance model and search arrive with issue 6.
namespace axonn::planner {}
