from setuptools import find_packages, setup

package_name = 'slide_core'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    package_data={package_name: ['py.typed', 'model/library/*.yaml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='Slide Robotics',
    maintainer_email='engineering@slide-robotics.com',
    description='The algorithms of slide, free of ROS.',
    license='Apache-2.0',
)
