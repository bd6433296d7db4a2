namespace axonn {}
